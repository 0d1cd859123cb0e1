// A browser's cookie jar, as far as the connect flow needs one: it keeps what Set-Cookie says (name,
// value, Path, Max-Age=0 as removal) and sends the cookies whose Path matches. Each Browser is its own
// person: a stranger is a second Browser.

interface StoredCookie {
  value: string;
  path: string;
  attributes: string[];
}

export class Browser {
  readonly #cookies = new Map<string, StoredCookie>();
  /** Every Set-Cookie line this browser received, as sent. */
  readonly setCookies: string[] = [];

  /** fetch without following redirects, with this browser's cookies. */
  async fetch(url: string | URL, init: RequestInit = {}): Promise<Response> {
    const target = new URL(url);
    const headers = new Headers(init.headers);
    const cookie = [...this.#cookies]
      .filter(
        ([, c]) => target.pathname === c.path || target.pathname.startsWith(`${c.path.replace(/\/$/, '')}/`),
      )
      .map(([name, c]) => `${name}=${c.value}`)
      .join('; ');
    if (cookie) headers.set('cookie', cookie);
    const res = await fetch(target, { ...init, headers, redirect: 'manual' });
    for (const line of res.headers.getSetCookie()) this.#store(line);
    return res;
  }

  cookie(name: string): StoredCookie | undefined {
    return this.#cookies.get(name);
  }

  #store(line: string): void {
    this.setCookies.push(line);
    const [pair = '', ...rest] = line.split(';').map((s) => s.trim());
    const eq = pair.indexOf('=');
    const name = pair.slice(0, eq);
    const attributes = rest;
    const path = rest.find((a) => /^path=/i.test(a))?.slice(5) ?? '/';
    if (rest.some((a) => /^max-age=0$/i.test(a))) this.#cookies.delete(name);
    else this.#cookies.set(name, { value: pair.slice(eq + 1), path, attributes });
  }
}
