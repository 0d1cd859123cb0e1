// The Idempotency-Key store, as Xero's "Idempotent requests" guide describes it
// (developer.xero.com/documentation/guides/idempotent-requests/idempotency): a key remembers the
// request it was first used with and the response that request got, so a retry is answered from the
// store instead of being executed again. "Key re-use is procesed per app", so keys are the app's, not
// a tenant's; "keys are stored for 6 minutes from the time of the first call, after which they
// expire", and a repeat after that "will instead be processed as a new key". An error is kept too:
// "If an idempotent request errors out internally, the error will be cached and returned when the
// request is re-run even if the internal error is resolved."

export const IDEMPOTENCY_KEY_MAX = 128;
/** From the first call, not from the last replay: a replay does not extend the window. */
export const IDEMPOTENCY_TTL_MS = 6 * 60 * 1000;

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string;
}

type Entry =
  | { state: 'pending'; fingerprint: string; firstCallAt: number }
  | { state: 'done'; fingerprint: string; response: StoredResponse; firstCallAt: number };

export type Claim =
  | { kind: 'new' }
  | { kind: 'replay'; response: StoredResponse }
  | { kind: 'mismatch' }
  | { kind: 'in-progress' };

/** JSON with object keys sorted, so key order and whitespace do not make two bodies "different". */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

export class IdempotencyStore {
  readonly #entries = new Map<string, Entry>();

  /** `app` is the OAuth client the request's token was issued to; `now` the sandbox clock. */
  claim(app: string, key: string, fingerprint: string, now: number): Claim {
    const id = `${app}\u0000${key}`;
    const entry = this.#entries.get(id);
    if (entry && now - entry.firstCallAt >= IDEMPOTENCY_TTL_MS) this.#entries.delete(id);
    const current = this.#entries.get(id);
    if (!current) {
      this.#entries.set(id, { state: 'pending', fingerprint, firstCallAt: now });
      return { kind: 'new' };
    }
    if (current.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (current.state === 'pending') return { kind: 'in-progress' };
    return { kind: 'replay', response: current.response };
  }

  complete(app: string, key: string, response: StoredResponse): void {
    const id = `${app}\u0000${key}`;
    const entry = this.#entries.get(id);
    if (entry) this.#entries.set(id, { ...entry, state: 'done', response });
  }

  /** Forgets a pending claim whose request never completed (it threw), so a retry runs it afresh. */
  abandon(app: string, key: string): void {
    const id = `${app}\u0000${key}`;
    if (this.#entries.get(id)?.state === 'pending') this.#entries.delete(id);
  }

  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
  }
}
