import { object } from 'zod/mini';
import { type Env, int, parseEnv } from '../util/config.js';
import { heartbeatVariable } from './heartbeats.js';
import type { TickHealthPolicy } from './tick-health.js';

export interface TickHealthConfig {
  policy: Pick<TickHealthPolicy, 'intervals' | 'failures'>;
  /** Tick name -> heartbeat ping URL (a secret). */
  heartbeats: Map<string, string>;
  /** Advisory problems (a malformed heartbeat URL): boot warns and goes on, without that heartbeat. */
  warnings: string[];
}

const schema = object({
  TICK_HEALTH_INTERVALS: int(1, 1000, 3),
  TICK_HEALTH_FAILURES: int(1, 1000, 2),
});

/**
 * K and the failure threshold are configuration (bad values fail boot, like every setting); the
 * heartbeat URLs are advisory: a malformed one is a warning naming the variable, never its value.
 */
export function loadTickHealthConfig(env: Env, ticks: readonly string[]): TickHealthConfig {
  const e = parseEnv(schema, env);
  const heartbeats = new Map<string, string>();
  const warnings: string[] = [];
  const known = new Set(ticks.map(heartbeatVariable));
  for (const tick of ticks) {
    const name = heartbeatVariable(tick);
    const value = env[name];
    if (value === undefined || value === '') continue;
    if (URL.canParse(value) && /^https?:$/.test(new URL(value).protocol) && new URL(value).hostname) {
      heartbeats.set(tick, value);
    } else {
      warnings.push(`${name} is not an http(s) URL: the ${tick} heartbeat is off`);
    }
  }
  for (const name of Object.keys(env)) {
    if (name.startsWith('TICK_HEARTBEAT_URL_') && !known.has(name) && env[name]) {
      warnings.push(`${name} names no enabled tick (${[...known].join(', ') || 'none'}): ignored`);
    }
  }
  return {
    policy: { intervals: e.TICK_HEALTH_INTERVALS, failures: e.TICK_HEALTH_FAILURES },
    heartbeats,
    warnings,
  };
}
