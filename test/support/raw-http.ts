// HTTP spoken over a bare TCP socket, byte for byte, as load balancers' health checkers speak it
// (HAProxy's default `option httpchk` sends `OPTIONS / HTTP/1.0` or `GET /path HTTP/1.0`, no Host).
import { connect, type Socket } from 'node:net';

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  raw: string;
}

/** Sends `request` as is and reads until the server closes the connection (HTTP/1.0 does). */
export function rawRequest(port: number, request: string, timeoutMs = 10_000): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    let raw = '';
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete answer in ${timeoutMs} ms; got: ${JSON.stringify(raw)}`));
    }, timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      raw += chunk;
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.on('close', () => {
      clearTimeout(timer);
      const [head = '', body = ''] = splitOnce(raw, '\r\n\r\n');
      const [statusLine = '', ...lines] = head.split('\r\n');
      const status = Number(statusLine.split(' ')[1]);
      if (!Number.isInteger(status)) return reject(new Error(`not an HTTP answer: ${JSON.stringify(raw)}`));
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const [name = '', value = ''] = splitOnce(line, ':');
        headers[name.trim().toLowerCase()] = value.trim();
      }
      resolve({ status, headers, body, raw });
    });
    socket.write(request);
  });
}

function splitOnce(s: string, separator: string): [string, string] {
  const i = s.indexOf(separator);
  return i < 0 ? [s, ''] : [s.slice(0, i), s.slice(i + separator.length)];
}

/** Opens a TCP connection that never sends a byte; resolves once connected. */
export function idleSocket(port: number): Promise<Socket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port });
    socket.once('connect', () => {
      socket.off('error', reject);
      socket.on('error', () => {}); // a reset by the server is what some tests wait for
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

export interface SlowUpload {
  /** The answer, as far as it arrived. */
  response: string;
  /** The error the socket met while sending (EPIPE, ECONNRESET), if any. */
  error: string | undefined;
  /** Bytes of the body the socket took before the end or the error. */
  sent: number;
  /** How the connection ended: the server's FIN after the body ('end'), or a reset ('error'). */
  ended: 'end' | 'error' | 'timeout';
}

/**
 * Sends `head` then `bodyBytes` of body in `chunkBytes` pieces `gapMs` apart, as a slow uplink does,
 * reading whatever comes back meanwhile; resolves once the connection ends.
 */
export function slowUpload(
  port: number,
  head: string,
  bodyBytes: number,
  { chunkBytes = 64 * 1024, gapMs = 40, timeoutMs = 20_000, chunked = false } = {},
): Promise<SlowUpload> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port });
    let response = '';
    let error: string | undefined;
    let sent = 0;
    let done = false;
    const finish = (ended: SlowUpload['ended']) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ response, error, sent, ended });
    };
    const timer = setTimeout(() => finish('timeout'), timeoutMs);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      response += chunk;
    });
    socket.on('end', () => finish(error ? 'error' : 'end'));
    socket.on('error', (err: NodeJS.ErrnoException) => {
      error = err.code ?? err.message;
      finish('error');
    });
    socket.once('connect', () => {
      socket.write(head);
      const piece = Buffer.alloc(chunkBytes, 'x');
      const next = () => {
        if (done || sent >= bodyBytes) return;
        const n = Math.min(chunkBytes, bodyBytes - sent);
        const last = sent + n >= bodyBytes;
        // Transfer-Encoding: chunked frames each piece, and a zero-length chunk ends the body.
        const framed = chunked
          ? Buffer.concat([
              Buffer.from(`${n.toString(16)}\r\n`),
              piece.subarray(0, n),
              Buffer.from(last ? '\r\n0\r\n\r\n' : '\r\n'),
            ])
          : piece.subarray(0, n);
        socket.write(framed, (err) => {
          if (err) return;
          sent += n;
          setTimeout(next, gapMs);
        });
      };
      next();
    });
  });
}
