import type { Logger } from '../util/log.js';
import { tickErrorCode } from './tick-health-store.js';

// Heartbeats in the healthchecks.io ping protocol, which Cronitor and Better Stack heartbeats accept
// too. From its docs (healthchecks.io/docs/http_api, /docs/signaling_failures): the check's ping URL
// signals success, `<ping URL>/start` that a run began, `<ping URL>/fail` a failure; a success after a
// start closes the run (and measures its duration). The URL holds the secret (a UUID or ping key +
// slug), so it never reaches a log line: only its origin does.

export type HeartbeatSignal = 'start' | 'success' | 'fail';

export const HEARTBEAT_TIMEOUT_MS = 5000;

/** The environment variable naming a tick's heartbeat URL: expire-carts -> TICK_HEARTBEAT_URL_EXPIRE_CARTS. */
export const heartbeatVariable = (tick: string) =>
  `TICK_HEARTBEAT_URL_${tick.toUpperCase().replace(/[^A-Z0-9]+/g, '_')}`;

/** What may be logged of a heartbeat URL: scheme and host. The path and query are the secret. */
export function redactHeartbeatUrl(url: string): string {
  return URL.canParse(url) ? `${new URL(url).origin}/[redacted]` : '[malformed]';
}

export function heartbeatUrlFor(base: string, signal: HeartbeatSignal): string {
  const url = new URL(base);
  const path = url.pathname.replace(/\/+$/, '');
  if (signal !== 'success') url.pathname = `${path}/${signal}`;
  return url.toString();
}

export interface HeartbeatOptions {
  log: Logger;
  timeoutMs?: number;
  fetch?: typeof fetch;
}

/** Sends one ping, bounded by a timeout; resolves either way, and says nothing secret when it fails. */
export async function ping(
  base: string,
  signal: HeartbeatSignal,
  tick: string,
  { log, timeoutMs, fetch: send = fetch }: HeartbeatOptions,
): Promise<void> {
  try {
    const res = await send(heartbeatUrlFor(base, signal), {
      method: 'GET',
      signal: AbortSignal.timeout(timeoutMs ?? HEARTBEAT_TIMEOUT_MS),
    });
    // Drain the body so the connection can be reused (and so workerd does not warn).
    await res.arrayBuffer().catch(() => undefined);
    if (!res.ok) {
      log.warn('heartbeat ping refused', {
        tick,
        signal,
        heartbeat: redactHeartbeatUrl(base),
        status: res.status,
      });
    }
  } catch (err) {
    const name = (err as { name?: unknown } | null)?.name;
    log.warn('heartbeat ping failed', {
      tick,
      signal,
      heartbeat: redactHeartbeatUrl(base),
      reason: name === 'TimeoutError' || name === 'AbortError' ? 'timeout' : tickErrorCode(err),
    });
  }
}
