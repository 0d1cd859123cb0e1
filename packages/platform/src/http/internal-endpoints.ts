import { object, optional, string } from 'zod/mini';
import { ConfigError, defaultBindHost, type Env, int, parseEnv } from '../util/config.js';

// /metrics and /healthz/ticks say how the service runs (pool sizes, queue depth, tick failures) and
// cost database reads: not for anyone who reaches the port. A process bound beyond loopback must guard
// them, or say that its network does (docs/observability.md, "Guarding the internal endpoints").

export interface InternalEndpointsConfig {
  /** METRICS_PORT: a second listener that alone serves /metrics and /healthz/ticks. */
  port: number | undefined;
}

const schema = object({
  HOST: optional(string()),
  DATABASE_URL: optional(string()),
  PORT: int(0, 65535, 8080),
  METRICS_PORT: int(1, 65535, undefined),
  METRICS_TOKEN: optional(string()),
  METRICS_PUBLIC: optional(string()),
});

/** 127.0.0.0/8, ::1 and localhost: only this machine can connect. */
export const isLoopbackHost = (host: string) =>
  host === 'localhost' || host === '::1' || host === '[::1]' || /^127(\.\d{1,3}){3}$/.test(host);

/** The process lifecycle's check (Node, Bun); a Worker has no HOST and relies on METRICS_TOKEN. */
export function loadInternalEndpointsConfig(env: Env): InternalEndpointsConfig {
  const e = parseEnv(schema, env);
  const problems: string[] = [];
  if (e.METRICS_PUBLIC !== undefined && e.METRICS_PUBLIC !== 'true')
    problems.push('METRICS_PUBLIC must be true or unset');
  if (e.METRICS_PORT !== undefined && e.METRICS_PORT === e.PORT)
    problems.push('METRICS_PORT must differ from PORT');
  const guarded =
    e.METRICS_TOKEN !== undefined || e.METRICS_PORT !== undefined || e.METRICS_PUBLIC === 'true';
  if (!guarded && !isLoopbackHost(e.HOST ?? defaultBindHost(e.DATABASE_URL))) {
    problems.push(
      'METRICS_PORT or METRICS_TOKEN is required when HOST is not loopback: /metrics and /healthz/ticks would be open on PORT (METRICS_PUBLIC=true if the network keeps that port internal)',
    );
  }
  if (problems.length > 0) throw new ConfigError(problems);
  return { port: e.METRICS_PORT };
}
