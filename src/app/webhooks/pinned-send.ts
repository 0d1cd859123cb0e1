import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import { systemResolver } from './dns-resolver.js';
import type { Sender } from './send.js';
import { blockedAddress, type Resolver } from './ssrf.js';

// DNS pinning on Node and Bun: the name is resolved once, inside the socket's own `lookup` (net.connect's
// option, https://nodejs.org/api/net.html#socketconnectoptions-connectlistener), every answer is checked
// against the SSRF guard, and the socket connects to those checked answers. A check before fetch() would
// not do: fetch resolves the name again, and a rebinding DNS server can answer differently the second
// time. node:http is used rather than undici's Agent (connect.lookup) because undici is not a dependency
// and the global fetch's dispatcher option is Node-only; Bun honours `lookup` in node:http too.
// TLS still verifies the certificate against the URL's host name (servername defaults to it).

/** The host resolved to an address the SSRF guard refuses: nothing was sent. Matched by name in deliver.ts. */
export class RefusedAddressError extends Error {
  override name = 'RefusedAddressError';
}

/** A send that got no (whole) answer within its timeout. */
class SendTimeoutError extends Error {
  override name = 'TimeoutError';
}

export function pinnedSender(resolve: Resolver = systemResolver): Sender {
  return (url, r) =>
    new Promise<number>((done, fail) => {
      const lookup = ((hostname: string, options: { all?: boolean }, callback: LookupCallback) => {
        resolve(hostname).then(
          (addresses) => {
            if (addresses.length === 0)
              return callback(new RefusedAddressError(`${hostname} does not resolve`), '', 4);
            for (const address of addresses) {
              const reason = blockedAddress(address, r.allowLoopback);
              if (reason)
                return callback(
                  new RefusedAddressError(`${hostname} resolves to a ${reason} address (${address})`),
                  '',
                  4,
                );
            }
            const checked = addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
            if (options?.all) return callback(null, checked);
            const [first] = checked as [{ address: string; family: number }];
            return callback(null, first.address, first.family);
          },
          () => callback(new RefusedAddressError(`${hostname} does not resolve`), '', 4),
        );
      }) as unknown as LookupFunction;
      const req = (url.protocol === 'https:' ? httpsRequest : httpRequest)(
        url,
        {
          method: 'POST',
          headers: { ...r.headers, 'content-length': String(Buffer.byteLength(r.body)) },
          lookup,
        },
        (res) => {
          let read = 0;
          const finish = () => {
            clearTimeout(timer);
            done(res.statusCode ?? 0);
          };
          res.on('data', (chunk: Buffer) => {
            read += chunk.byteLength;
            // Only the status is needed: past the cap, the rest is dropped with the connection.
            if (read > r.maxResponseBytes) {
              res.destroy();
              finish();
            }
          });
          res.on('end', finish);
          res.on('error', () => finish());
        },
      );
      const timer = setTimeout(
        () => req.destroy(new SendTimeoutError(`no answer within ${r.timeoutMs} ms`)),
        r.timeoutMs,
      );
      req.on('error', (err) => {
        clearTimeout(timer);
        fail(err);
      });
      req.end(r.body);
    });
}

type LookupCallback = (
  err: Error | null,
  address: string | { address: string; family: number }[],
  family?: number,
) => void;
