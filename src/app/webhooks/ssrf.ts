// The SSRF guard for webhook endpoints: a receiver URL may name only a public address. Checked when an
// endpoint is registered or changed (the URL's own host) and again before each delivery, on every
// address its name resolves to, where the runtime can resolve (a Resolver; none on Workers, where
// Cloudflare's egress rules apply instead).

export interface EndpointUrlOptions {
  /** WEBHOOK_ALLOW_INSECURE: http and loopback receivers, for tests and local development only. */
  allowInsecure: boolean;
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; message: string };

/** Every address a name resolves to (A and AAAA). */
export type Resolver = (hostname: string) => Promise<string[]>;

const MAX_URL_LENGTH = 2048;

/**
 * Why an address is refused, or undefined for a public one. IPv4 and IPv6, with IPv4 embedded in IPv6
 * (mapped `::ffff:a.b.c.d`, compatible `::a.b.c.d`, NAT64 `64:ff9b::/96`, 6to4 `2002::/16`) judged as
 * the IPv4 address it carries. `allowLoopback` lets loopback through (the development setting).
 */
export function blockedAddress(address: string, allowLoopback = false): string | undefined {
  const v4 = parseIPv4(address);
  if (v4) return blockedIPv4(v4, allowLoopback);
  const v6 = parseIPv6(address);
  if (!v6) return 'not an IP address';
  return blockedIPv6(v6, allowLoopback);
}

function blockedIPv4([a, b, c]: number[], allowLoopback: boolean): string | undefined {
  if (a === undefined || b === undefined || c === undefined) return 'not an IP address';
  if (a === 127) return allowLoopback ? undefined : 'loopback';
  if (a === 169 && b === 254) return c === 169 || c === 170 ? 'metadata' : 'link-local'; // 169.254.169.254, .170.2
  if (a === 0) return 'unspecified';
  if (a === 10 || (a === 172 && b >= 16 && b <= 31) || (a === 192 && b === 168)) return 'private';
  if (a === 100 && b >= 64 && b <= 127) return 'CGNAT';
  if (a === 192 && b === 0 && c === 0) return 'reserved'; // IETF protocol assignments (incl. 192.0.0.192)
  if (
    (a === 192 && b === 0 && c === 2) ||
    (a === 198 && b === 51 && c === 100) ||
    (a === 203 && b === 0 && c === 113)
  )
    return 'documentation';
  if (a === 198 && (b === 18 || b === 19)) return 'benchmarking';
  if (a >= 224) return a < 240 ? 'multicast' : 'reserved';
  return undefined;
}

function blockedIPv6(h: number[], allowLoopback: boolean): string | undefined {
  const [h0 = 0, h1 = 0, h2 = 0, h3 = 0, h4 = 0, h5 = 0, h6 = 0, h7 = 0] = h;
  const embedded = (hi: number, lo: number) => [hi >> 8, hi & 0xff, lo >> 8, lo & 0xff];
  const zeroPrefix = h0 === 0 && h1 === 0 && h2 === 0 && h3 === 0 && h4 === 0;
  if (zeroPrefix && h5 === 0 && h6 === 0 && h7 === 0) return 'unspecified';
  if (zeroPrefix && h5 === 0 && h6 === 0 && h7 === 1) return allowLoopback ? undefined : 'loopback';
  // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated but still routed by some stacks).
  if (zeroPrefix && (h5 === 0xffff || h5 === 0)) return blockedIPv4(embedded(h6, h7), allowLoopback);
  // ::ffff:0:a.b.c.d (SIIT).
  if (h0 === 0 && h1 === 0 && h2 === 0 && h3 === 0 && h4 === 0xffff && h5 === 0)
    return blockedIPv4(embedded(h6, h7), allowLoopback);
  if (h0 === 0x64 && h1 === 0xff9b) {
    // NAT64: the well-known prefix carries an IPv4 address; the local-use 64:ff9b:1::/48 is private.
    if (h2 === 0 && h3 === 0 && h4 === 0 && h5 === 0) return blockedIPv4(embedded(h6, h7), allowLoopback);
    if (h2 === 1) return 'private';
  }
  if (h0 === 0x2002) return blockedIPv4(embedded(h1, h2), allowLoopback); // 6to4
  if (h0 === 0xfd00 && h1 === 0x0ec2) return 'metadata'; // AWS's IPv6 instance metadata (fd00:ec2::254)
  if ((h0 & 0xfe00) === 0xfc00) return 'private'; // fc00::/7 unique local
  if ((h0 & 0xffc0) === 0xfe80) return 'link-local';
  if ((h0 & 0xffc0) === 0xfec0) return 'private'; // deprecated site-local
  if ((h0 & 0xff00) === 0xff00) return 'multicast';
  if (h0 === 0x2001 && h1 === 0x0db8) return 'documentation';
  if (h0 === 0x0100 && h1 === 0 && h2 === 0 && h3 === 0) return 'reserved'; // discard-only
  return undefined;
}

function parseIPv4(s: string): number[] | undefined {
  const m = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(s);
  if (!m) return undefined;
  const parts = m.slice(1).map(Number);
  return parts.every((n) => n <= 255) ? parts : undefined;
}

/** Eight 16-bit groups, or undefined; a zone (`%eth0`) and brackets are refused by the caller. */
function parseIPv6(s: string): number[] | undefined {
  if (!/^[0-9a-f:.]+$/i.test(s) || !s.includes(':')) return undefined;
  let text = s;
  const tail: number[] = [];
  const dotted = /(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})$/.exec(text);
  if (dotted?.[1]) {
    const v4 = parseIPv4(dotted[1]);
    if (!v4) return undefined;
    const [a = 0, b = 0, c = 0, d = 0] = v4;
    tail.push((a << 8) | b, (c << 8) | d);
    text = text.slice(0, -dotted[1].length);
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1);
  }
  const halves = text.split('::');
  if (halves.length > 2) return undefined;
  const groups = (part: string | undefined) => (part ? part.split(':') : []);
  const head = groups(halves[0]);
  const rest = groups(halves[1]);
  if ([...head, ...rest].some((g) => !/^[0-9a-f]{1,4}$/i.test(g))) return undefined;
  const fixed = head.length + rest.length + tail.length;
  if (halves.length === 1 ? fixed !== 8 : fixed > 7) return undefined;
  const zeros = Array<number>(8 - fixed).fill(0);
  return [
    ...head.map((g) => Number.parseInt(g, 16)),
    ...zeros,
    ...rest.map((g) => Number.parseInt(g, 16)),
    ...tail,
  ];
}

/** The host of a URL as an address, when it is one (WHATWG URL has already normalized `0x7f.1`, `2130706433`). */
function literalHost(hostname: string): string | undefined {
  if (hostname.startsWith('[') && hostname.endsWith(']')) return hostname.slice(1, -1);
  return parseIPv4(hostname) ? hostname : undefined;
}

const LOOPBACK_NAMES = /^(localhost|localhost\.localdomain|ip6-localhost|ip6-loopback)\.?$|\.localhost\.?$/i;

/**
 * Checks a receiver URL as registered: absolute, https (http only with allowInsecure), no credentials,
 * no fragment, and a host that is not a refused address or a loopback name. A name that resolves to a
 * refused address is caught at delivery (checkResolved), and at registration where a Resolver is given.
 */
export function checkEndpointUrl(raw: string, o: EndpointUrlOptions): UrlCheck {
  if (raw.length > MAX_URL_LENGTH)
    return { ok: false, message: `must be at most ${MAX_URL_LENGTH} characters` };
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return { ok: false, message: 'must be an absolute URL' };
  }
  if (url.protocol !== 'https:' && !(o.allowInsecure && url.protocol === 'http:'))
    return { ok: false, message: o.allowInsecure ? 'must be an https or http URL' : 'must be an https URL' };
  if (url.username || url.password) return { ok: false, message: 'must not carry credentials' };
  if (url.hash) return { ok: false, message: 'must not have a fragment' };
  const host = url.hostname;
  if (!host) return { ok: false, message: 'must name a host' };
  const literal = literalHost(host);
  if (literal !== undefined) {
    const reason = blockedAddress(literal, o.allowInsecure);
    if (reason) return { ok: false, message: `must not name a ${reason} address` };
  } else if (LOOPBACK_NAMES.test(host) && !o.allowInsecure) {
    return { ok: false, message: 'must not name a loopback address' };
  } else if (!host.includes('.') && !o.allowInsecure) {
    return { ok: false, message: 'must name a public host (a dotted name or an address)' };
  }
  return { ok: true, url };
}

/**
 * Resolves the URL's host and refuses it unless every address is public: one private answer among
 * public ones is refused too (a resolver may pick either). An address literal is checked as is.
 * Returns undefined when the host may be contacted, else why not.
 */
export async function checkResolved(
  url: URL,
  resolve: Resolver | undefined,
  o: EndpointUrlOptions,
): Promise<string | undefined> {
  const literal = literalHost(url.hostname);
  if (literal !== undefined) {
    const reason = blockedAddress(literal, o.allowInsecure);
    return reason && `${url.hostname} is a ${reason} address`;
  }
  if (!resolve) return undefined;
  let addresses: string[];
  try {
    addresses = await resolve(url.hostname);
  } catch {
    return `${url.hostname} does not resolve`;
  }
  if (addresses.length === 0) return `${url.hostname} does not resolve`;
  for (const address of addresses) {
    const reason = blockedAddress(address, o.allowInsecure);
    if (reason) return `${url.hostname} resolves to a ${reason} address (${address})`;
  }
  return undefined;
}
