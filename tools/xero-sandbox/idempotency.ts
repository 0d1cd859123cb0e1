// The Idempotency-Key store: per tenant, a key remembers the request it was first used with and the
// response that request got, so a retry is answered from the store instead of being executed again.

export const IDEMPOTENCY_KEY_MAX = 128;
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

export interface StoredResponse {
  status: number;
  body: string;
  contentType: string;
}

type Entry =
  | { state: 'pending'; fingerprint: string }
  | { state: 'done'; fingerprint: string; response: StoredResponse; storedAt: number };

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

  claim(tenantId: string, key: string, fingerprint: string, now: number): Claim {
    const id = `${tenantId}\u0000${key}`;
    const entry = this.#entries.get(id);
    if (entry?.state === 'done' && now - entry.storedAt > IDEMPOTENCY_TTL_MS) this.#entries.delete(id);
    const current = this.#entries.get(id);
    if (!current) {
      this.#entries.set(id, { state: 'pending', fingerprint });
      return { kind: 'new' };
    }
    if (current.fingerprint !== fingerprint) return { kind: 'mismatch' };
    if (current.state === 'pending') return { kind: 'in-progress' };
    return { kind: 'replay', response: current.response };
  }

  complete(tenantId: string, key: string, response: StoredResponse, now: number): void {
    const id = `${tenantId}\u0000${key}`;
    const entry = this.#entries.get(id);
    if (entry)
      this.#entries.set(id, { state: 'done', fingerprint: entry.fingerprint, response, storedAt: now });
  }

  /** Forgets a pending claim whose request never completed (it threw), so a retry runs it afresh. */
  abandon(tenantId: string, key: string): void {
    const id = `${tenantId}\u0000${key}`;
    if (this.#entries.get(id)?.state === 'pending') this.#entries.delete(id);
  }

  get size(): number {
    return this.#entries.size;
  }

  clear(): void {
    this.#entries.clear();
  }
}
