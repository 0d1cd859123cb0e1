// The deploy files agree with the app: fly.toml's ports, checks and kill timeout, and a Dockerfile
// whose final stage runs what tools/build.mjs produces. No Docker engine needed: the files are parsed.
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { ConfigError, loadConfig } from '@honest-health/platform';
import { ReadinessGate } from '@honest-health/platform/internal/http/gate';
import { healthRoutes, LIVENESS_PATHS } from '@honest-health/platform/internal/http/health';
import { loadInternalEndpointsConfig } from '@honest-health/platform/internal/http/internal-endpoints';
import { TICK_HEALTH_PATH } from '@honest-health/platform/internal/http/tick-health-route';
import { parse } from 'smol-toml';
import { describe, expect, it } from 'vitest';
import { EMBEDDED_NODE_FLAGS, NODE_FLAGS, repoRoot } from '../support/server.js';

const read = (file: string) => readFileSync(resolve(repoRoot, file), 'utf8');
const defaults = loadConfig({});

/** Fly durations: "30s", "2m", "500ms", or a bare number of seconds. */
function seconds(value: unknown): number {
  if (typeof value === 'number') return value;
  const match = /^(\d+(?:\.\d+)?)(ms|s|m|h)$/.exec(String(value));
  if (!match) throw new Error(`not a duration: ${String(value)}`);
  const unit = { ms: 0.001, s: 1, m: 60, h: 3600 }[match[2] as 'ms' | 's' | 'm' | 'h'];
  return Number(match[1]) * unit;
}

/** The app's own health router, with the gate open and a database probe that answers ok. */
function health() {
  const gate = new ReadinessGate();
  gate.open();
  return healthRoutes({
    gate,
    writeProbe: () => ({ check: async () => ({ status: 'ok', latencyMs: 0 }), last: undefined }),
  });
}

interface FlyCheck {
  type?: string;
  port?: number;
  method?: string;
  path?: string;
  grace_period?: string;
  interval?: string;
  timeout?: string;
}
interface FlyToml {
  app: string;
  primary_region: string;
  kill_signal: string;
  kill_timeout: string | number;
  build: { dockerfile?: string };
  env: Record<string, string>;
  http_service: {
    internal_port: number;
    force_https: boolean;
    auto_stop_machines: string | boolean;
    auto_start_machines: boolean;
    min_machines_running: number;
    checks: FlyCheck[];
  };
  checks: Record<string, FlyCheck>;
  metrics?: { port?: number; path?: string };
  deploy?: { release_command?: string };
}

describe('fly.toml', () => {
  const fly = parse(read('fly.toml')) as unknown as FlyToml;

  it('serves on the port the app listens on by default, on all interfaces', () => {
    expect(fly.http_service.internal_port).toBe(defaults.port);
    expect(fly.env.PORT).toBe(String(defaults.port));
    expect(fly.env.HOST).toBe('0.0.0.0');
    expect(loadConfig(fly.env).port).toBe(fly.http_service.internal_port);
    expect(fly.http_service.force_https).toBe(true);
    // The ticks run in-process: auto-stop must leave at least one machine running.
    expect(fly.http_service.min_machines_running).toBeGreaterThanOrEqual(1);
    expect(fly.build.dockerfile).toBe('Dockerfile');
    // Migrations run at boot under the advisory lock, not from a release command.
    expect(fly.deploy?.release_command).toBeUndefined();
  });

  it('routes on /readyz and monitors /livez, and both routes answer 200 in the app', async () => {
    expect(fly.http_service.checks).toHaveLength(1);
    const routing = fly.http_service.checks[0];
    expect(routing).toMatchObject({ method: 'GET', path: '/readyz' });
    expect(seconds(routing?.grace_period)).toBe(30);
    expect(seconds(routing?.interval)).toBe(10);
    expect(seconds(routing?.timeout)).toBe(5);
    // The probe is bounded by PROBE_TIMEOUT_MS: Fly must wait longer than that for an answer.
    expect(seconds(routing?.timeout) * 1000).toBeGreaterThan(defaults.probeTimeoutMs);

    const livez = fly.checks.livez;
    expect(livez).toMatchObject({ type: 'http', port: defaults.port, path: '/livez' });
    expect(seconds(livez?.grace_period)).toBe(10);
    expect(seconds(livez?.interval)).toBe(15);
    expect(seconds(livez?.timeout)).toBe(2);

    const routes = health();
    for (const path of [routing?.path, livez?.path]) {
      const res = await routes.request(path ?? '/missing');
      expect(res.status, path).toBe(200);
      expect(await res.json()).toMatchObject({ status: 'ok' });
    }
  });

  it('monitors /healthz/ticks with a top-level check, never a routing one', () => {
    const ticks = fly.checks.ticks;
    // On the internal port: the public one answers /healthz/ticks 404 (docs/observability.md).
    expect(ticks).toMatchObject({
      type: 'http',
      port: Number(fly.env.METRICS_PORT),
      method: 'GET',
      path: TICK_HEALTH_PATH,
    });
    expect(fly.http_service.checks.map((c) => c.path)).not.toContain(TICK_HEALTH_PATH);
    // It reads the database (bounded by PROBE_TIMEOUT_MS): Fly must wait longer than that.
    expect(seconds(ticks?.timeout) * 1000).toBeGreaterThan(defaults.probeTimeoutMs);
    // Tick health is not liveness: /healthz stays dependency-free.
    expect(LIVENESS_PATHS.has(TICK_HEALTH_PATH)).toBe(false);
  });

  it('keeps /metrics and /healthz/ticks internal: METRICS_PORT, scraped by Fly, exposed by no service', () => {
    const port = Number(fly.env.METRICS_PORT);
    expect(loadInternalEndpointsConfig(fly.env)).toEqual({ port });
    expect(port).not.toBe(fly.http_service.internal_port);
    expect(fly.metrics).toEqual({ port, path: '/metrics' });
    // fly.toml holds no secret: the guard is the port, not a token.
    expect(fly.env.METRICS_TOKEN).toBeUndefined();
    // Without the port, this [env] would not boot: HOST is 0.0.0.0.
    const { METRICS_PORT: _, ...unguarded } = fly.env;
    expect(() => loadInternalEndpointsConfig(unguarded)).toThrow(ConfigError);
  });

  it('sends SIGTERM and waits longer than the drain budget before SIGKILL', () => {
    expect(fly.kill_signal).toBe('SIGTERM');
    // After the budget each remaining shutdown stage still gets up to a second (close the pools,
    // flush error tracking): leave room for those too.
    expect(seconds(fly.kill_timeout)).toBeGreaterThan(defaults.shutdownTimeoutMs / 1000 + 2);
  });
});

describe('Dockerfile', () => {
  const lines = read('Dockerfile')
    .replace(/\\\n/g, ' ')
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith('#'));
  const stages: string[][] = [];
  for (const line of lines) {
    if (/^FROM\s/i.test(line)) stages.push([]);
    stages.at(-1)?.push(line);
  }
  const final = stages.at(-1) ?? [];
  const build = stages[0] ?? [];
  const instruction = (stage: string[], name: string) =>
    stage.filter((l) => l.toUpperCase().startsWith(`${name} `)).map((l) => l.slice(name.length).trim());

  // tools/build.mjs's outputs: outdir/<entry name>.js for each entry point.
  const buildScript = read('tools/build.mjs');
  const outdir = /outdir:\s*'([^']+)'/.exec(buildScript)?.[1];
  const entries = Object.fromEntries(
    [...(/entryPoints:\s*\{([^}]*)\}/.exec(buildScript)?.[1] ?? '').matchAll(/(\w+):\s*'([^']+)'/g)].map(
      (m) => [m[1], m[2]],
    ),
  );

  it('builds in one stage and runs in another, both on Node 24', () => {
    expect(stages.length).toBeGreaterThanOrEqual(2);
    for (const stage of stages) expect(stage[0]).toMatch(/^FROM node:24-bookworm-slim\b/);
    const runs = instruction(build, 'RUN');
    expect(runs).toEqual(expect.arrayContaining([expect.stringMatching(/^npm ci\b/)]));
    // `npm ci --ignore-scripts` leaves the `node` package's bin dangling, and `npm run` would put it
    // first on PATH: the build calls the image's Node itself, with what `npm run build` runs.
    const pkg = JSON.parse(read('package.json')) as { scripts: Record<string, string> };
    expect(pkg.scripts.build).toBe('node tools/build.mjs');
    expect(runs).toContain(pkg.scripts.build);
    expect(runs.some((r) => r.startsWith('npm run'))).toBe(false);
    // The build stage has what tools/build.mjs reads, the platform's workspace package included, whose
    // manifest npm ci needs before it installs.
    const copied = instruction(build, 'COPY').join('\n');
    for (const needed of [
      'package-lock.json',
      'packages/platform/package.json',
      'packages',
      'tools',
      'src',
      'tsconfig.json',
    ])
      expect(copied).toContain(needed);
  });

  it('installs production dependencies only, as a non-root user', () => {
    const runs = instruction(final, 'RUN');
    expect(runs.some((r) => /^npm ci\b/.test(r) && r.includes('--omit=dev'))).toBe(true);
    expect(instruction(final, 'COPY').join('\n')).toContain('packages/platform/package.json');
    const user = instruction(final, 'USER').at(-1);
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(instruction(final, 'ENV')).toContain('NODE_ENV=production');
    expect(instruction(final, 'EXPOSE')).toEqual([String(defaults.port)]);
  });

  it('runs dist/node.js, which is what tools/build.mjs produces from the Node entry', () => {
    const cmd = JSON.parse(instruction(final, 'CMD').at(-1) ?? '[]') as string[];
    expect(cmd[0]).toBe('node');
    // What the tests and benches measure is what runs.
    expect(cmd.slice(1, -1)).toEqual(NODE_FLAGS);
    const script = cmd.at(-1);
    expect(script).toBe('dist/node.js');
    expect(outdir).toBe('dist');
    expect(entries.node).toBe('src/runtime/node.ts');
    expect(`${outdir}/node.js`).toBe(script);
    expect(instruction(final, 'COPY')).toContain(`--from=build /app/${outdir} ./${outdir}`);
  });

  it('binds every interface, with /metrics and /healthz/ticks on their own port, so boot does not refuse', () => {
    const env = instruction(final, 'ENV');
    expect(env).toContain('HOST=0.0.0.0');
    expect(env).toEqual(expect.arrayContaining([expect.stringMatching(/^METRICS_PORT=\d+$/)]));
  });

  it('keeps local state, build output and node_modules out of the build context', () => {
    const ignored = read('.dockerignore')
      .split('\n')
      .map((l) => l.trim());
    for (const entry of ['node_modules', 'dist', '.data', '.git']) expect(ignored).toContain(entry);
  });
});

describe('package.json', () => {
  const scripts = (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts;

  it('starts `npm start` with the flags the tests start it with', () => {
    const start = /node (.*) --import tsx dev\/start\.ts$/.exec(scripts.start ?? '')?.[1]?.split(' ');
    expect(start).toEqual([...NODE_FLAGS, ...EMBEDDED_NODE_FLAGS]);
  });

  it('runs every operator command on the embedded database with the embedded flags', () => {
    const commands = Object.values(scripts).filter((s) => /^tsx .*cli\//.test(s));
    expect(commands.length).toBeGreaterThan(5);
    for (const command of commands) expect(command).toMatch(`tsx ${EMBEDDED_NODE_FLAGS.join(' ')} cli/`);
  });
});

describe('wrangler.toml', () => {
  const wrangler = parse(read('wrangler.toml')) as {
    main?: string;
    compatibility_date?: string;
    compatibility_flags?: string[];
    triggers?: { crons?: string[] };
    vars?: Record<string, string>;
  };

  it('points at the Worker entry, on the newest compatibility date the installed workerd accepts', () => {
    expect(wrangler.main).toBe('src/runtime/worker.ts');
    expect(existsSync(resolve(repoRoot, wrangler.main ?? ''))).toBe(true);
    // workerd's version is 1.YYYYMMDD.n: the date is the newest compatibility date it knows for sure.
    const workerd = (JSON.parse(read('node_modules/workerd/package.json')) as { version: string }).version;
    const date = /^1\.(\d{4})(\d{2})(\d{2})\./.exec(workerd)?.slice(1).join('-');
    expect(wrangler.compatibility_date).toBe(date);
    expect(wrangler.compatibility_flags).toContain('nodejs_compat');
  });

  it('runs the ticks every minute and commits no secret', () => {
    expect(wrangler.triggers?.crons).toEqual(['* * * * *']);
    const vars = Object.keys(wrangler.vars ?? {});
    for (const secret of ['DATABASE_URL', 'TOKEN_ENCRYPTION_KEY', 'XERO_CLIENT_SECRET', 'SENTRY_DSN']) {
      expect(vars).not.toContain(secret);
    }
  });
});
