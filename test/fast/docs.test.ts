// The docs keep up with the code: every environment variable the code reads is on
// docs/configuration.md, every npm script on docs/development.md (and every bench:* script and BENCH_*
// knob on docs/benchmarks.md), every relative link in README.md, ARCHITECTURE.md and docs/*.md reaches
// a file (and its #anchor a heading), README.md links every docs/ page, every docs/ page and
// ARCHITECTURE.md section a code comment names exists, and the Kubernetes Deployment's numbers fit the
// server's shutdown budget and migration window.
// Plain file reads: no database, no build.
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { loadConfig } from '@honest-health/platform';
import { loadInternalEndpointsConfig } from '@honest-health/platform/internal/http/internal-endpoints';
import { describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const read = (path: string) => readFileSync(join(root, path), 'utf8');

// Every folder of code, the platform's package included.
const CODE_DIRS = ['src', 'packages', 'tools', 'test', 'bench'];

function filesUnder(dir: string, extensions: readonly string[]): string[] {
  const out: string[] = [];
  const walk = (path: string) => {
    for (const entry of readdirSync(join(root, path))) {
      if (entry === 'node_modules' || entry.startsWith('.')) continue;
      const child = `${path}/${entry}`;
      if (statSync(join(root, child)).isDirectory()) walk(child);
      else if (extensions.some((ext) => entry.endsWith(ext))) out.push(child);
    }
  };
  walk(dir);
  return out;
}

const CODE = ['.ts', '.mjs', '.js'];

// Read by the code but not configuration: passed through to child processes as they are.
const NOT_CONFIGURATION = new Set(['PATH']);

/** The top-level keys of every `object({ ... })` in a file that parses the environment (zod schemas). */
function schemaKeys(text: string): string[] {
  if (!text.includes('parseEnv(')) return [];
  const keys: string[] = [];
  for (const start of text.matchAll(/\bobject\(\{/g)) {
    let depth = 0;
    let body = '';
    for (let i = (start.index ?? 0) + 'object('.length; i < text.length; i++) {
      const ch = text[i];
      if (ch === '{' || ch === '(' || ch === '[') depth++;
      if (ch === '}' || ch === ')' || ch === ']') depth--;
      // Only what sits directly inside the object's braces.
      if (depth === 1 && ch !== '{') body += ch;
      else if (depth === 1) body += '\n';
      if (depth === 0) break;
    }
    for (const m of body.matchAll(/^\s*([A-Z][A-Z0-9_]*)\s*:/gm)) if (m[1]) keys.push(m[1]);
  }
  return keys;
}

const READ_PATTERNS = [
  /process\.env\.([A-Za-z_][A-Za-z0-9_]*)/g,
  /process\.env\[\s*['"]([A-Za-z_][A-Za-z0-9_]*)['"]\s*\]/g,
  /\benv\.([A-Z][A-Z0-9_]*)\b/g,
  /\benv\[\s*['"]([A-Z][A-Z0-9_]*)['"]\s*\]/g,
  // Helpers that read one variable by name: telemetry config, OpenTelemetry's, the benches'.
  /\b(?:value|getNumberFromEnv|getStringFromEnv|getBooleanFromEnv|getStringListFromEnv)\(\s*['"]([A-Z][A-Z0-9_]*)['"]/g,
  // Names built at run time (`TICK_HEARTBEAT_URL_${tick}`): the prefix is what must be documented.
  /`([A-Z][A-Z0-9_]*_)\$\{/g,
];

/** Every variable src/, packages/, cli/, dev/, tools/ and wrangler.toml's [vars] read. */
function variablesRead(): Map<string, string> {
  const found = new Map<string, string>();
  for (const file of ['src', 'packages', 'cli', 'dev', 'tools'].flatMap((dir) => filesUnder(dir, CODE))) {
    const text = read(file);
    const names = [
      ...schemaKeys(text),
      ...READ_PATTERNS.flatMap((p) => [...text.matchAll(p)].map((m) => m[1])),
    ];
    for (const name of names) if (name && !found.has(name)) found.set(name, file);
  }
  const vars =
    read('wrangler.toml')
      .split(/^\[vars\]$/m)[1]
      ?.split(/^\[/m)[0] ?? '';
  for (const m of vars.matchAll(/^([A-Z][A-Z0-9_]*)\s*=/gm))
    if (m[1] && !found.has(m[1])) found.set(m[1], 'wrangler.toml');
  for (const name of NOT_CONFIGURATION) found.delete(name);
  return found;
}

/** `name` as a whole token: TICK_HEARTBEAT_URL_ (a prefix) matches `TICK_HEARTBEAT_URL_<TICK>`. */
const mentions = (text: string, name: string) => {
  const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  const tail = name.endsWith('_') ? '(?![A-Za-z0-9])' : '(?![A-Za-z0-9_])';
  return new RegExp(`(?<![A-Za-z0-9_])${escaped}${tail}`).test(text);
};

/** Markdown without its fenced code blocks (whose `# comments` are not headings, `[x](y)` not links). */
const prose = (markdown: string) => markdown.replace(/^(```|~~~)[^\n]*\n[\s\S]*?^\1[^\n]*$/gm, '');

/** GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const m of prose(markdown).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = (m[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  return out;
}

const MARKDOWN = ['README.md', 'ARCHITECTURE.md', ...filesUnder('docs', ['.md'])];

/** Every relative link that points nowhere: a missing file, or an #anchor no heading makes. */
function brokenLinks(): string[] {
  const broken: string[] = [];
  for (const file of MARKDOWN) {
    const text = read(file);
    for (const m of prose(text).matchAll(/\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = m[1] ?? '';
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue; // https:, mailto:
      const [path = '', anchor] = target.split('#');
      const resolved = path === '' ? join(root, file) : resolve(dirname(join(root, file)), path);
      if (!existsSync(resolved)) {
        broken.push(`${file}: ${target} (no such file)`);
        continue;
      }
      if (anchor && resolved.endsWith('.md') && !anchors(readFileSync(resolved, 'utf8')).has(anchor)) {
        broken.push(`${file}: ${target} (no such heading in ${relative(root, resolved)})`);
      }
    }
  }
  return broken;
}

describe('docs/configuration.md', () => {
  const variables = variablesRead();

  it('finds the variables the code reads (the scan itself works)', () => {
    for (const name of [
      'DATABASE_URL',
      'SHUTDOWN_DELAY_MS',
      'XERO_AUTHORIZE_URL',
      'XERO_SCOPES',
      'XERO_REDIRECT_URI',
      'HTTP_MAX_CONNECTIONS',
      'TICK_HEALTH_INTERVALS',
      'TICK_HEARTBEAT_URL_',
      'METRICS_TOKEN',
      'OTEL_TRACES_SAMPLER',
      'FLY_MACHINE_ID',
      'WORKER_GZIP_MAX_KIB',
    ]) {
      expect(variables.has(name), name).toBe(true);
    }
  });

  it('names every variable the code reads', () => {
    const page = read('docs/configuration.md');
    const missing = [...variables].filter(([name]) => !mentions(page, name)).map(([n, f]) => `${n} (${f})`);
    expect(missing, 'read by the code, missing from docs/configuration.md').toEqual([]);
  });
});

describe('docs/development.md and docs/benchmarks.md', () => {
  const scripts = Object.keys(
    (JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts,
  );

  it('names every npm script', () => {
    const page = read('docs/development.md');
    const missing = scripts.filter((name) => {
      const escaped = name.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
      return !new RegExp(`\`npm (?:run (?:-s )?)?${escaped}(?=[\\s\`])`).test(page);
    });
    expect(missing, 'in package.json, missing from docs/development.md').toEqual([]);
  });

  it('describes every bench:* script', () => {
    const page = read('docs/benchmarks.md');
    const missing = scripts.filter(
      (name) => name.startsWith('bench:') && !new RegExp(`^## ${name}$`, 'm').test(page),
    );
    expect(missing, 'bench:* scripts without a "## bench:name" section in docs/benchmarks.md').toEqual([]);
  });
});

describe('docs/benchmarks.md knobs', () => {
  it('names every BENCH_* knob the benchmarks read', () => {
    const page = read('docs/benchmarks.md');
    const knobs = new Set<string>();
    for (const file of filesUnder('bench', CODE)) {
      for (const m of read(file).matchAll(/\b(BENCH_[A-Z0-9_]+)\b/g)) if (m[1]) knobs.add(m[1]);
    }
    expect(knobs.size).toBeGreaterThan(10);
    expect(
      [...knobs].filter((name) => !mentions(page, name)),
      'read in bench/, missing from docs/benchmarks.md',
    ).toEqual([]);
  });
});

describe('links', () => {
  it('every relative link in README.md, ARCHITECTURE.md and docs/*.md reaches a file and heading', () => {
    expect(MARKDOWN.length).toBeGreaterThan(10);
    expect(brokenLinks()).toEqual([]);
  });

  it('README.md links every page in docs/', () => {
    const readme = prose(read('README.md'));
    const unlinked = filesUnder('docs', ['.md']).filter((page) => !readme.includes(`](${page})`));
    expect(unlinked, 'docs/ pages the README does not link').toEqual([]);
  });

  it('every docs/ page the code names exists', () => {
    const named = new Set<string>();
    for (const file of CODE_DIRS.flatMap((dir) => filesUnder(dir, CODE))) {
      for (const m of read(file).matchAll(/\bdocs\/[a-z0-9-]+\.md\b/g)) named.add(m[0]);
    }
    expect([...named].filter((page) => !existsSync(join(root, page)))).toEqual([]);
  });

  it('every ARCHITECTURE.md section a code comment names exists', () => {
    const sections = anchors(read('ARCHITECTURE.md'));
    const named: string[] = [];
    for (const file of CODE_DIRS.flatMap((dir) => filesUnder(dir, CODE))) {
      // Comments wrap: join continued `//` lines before looking for the file name and a quoted title.
      const text = read(file).replace(/\n\s*\/\/ ?/g, ' ');
      for (const m of text.matchAll(/ARCHITECTURE\.md,? "([^"]+)"/g)) named.push(`${file}: ${m[1]}`);
    }
    const missing = named.filter((entry) => {
      const title = entry.slice(entry.indexOf(': ') + 2);
      return ![...anchors(`# ${title}`)].every((a) => sections.has(a));
    });
    expect(named.length).toBeGreaterThan(0);
    expect(missing, 'named in a comment, no such section in ARCHITECTURE.md').toEqual([]);
  });
});

// The Deployment on docs/kubernetes.md agrees with the server's defaults, as test/deploy-config.test.ts
// checks fly.toml: a grace period the drain fits in, a startup window the migration lock wait fits in.
describe('docs/kubernetes.md', () => {
  const yaml = /```yaml\n([\s\S]*?)```/.exec(read('docs/kubernetes.md'))?.[1] ?? '';
  const probe = (name: string) => {
    const block = new RegExp(`^( +)${name}:\\n((?:\\1 +.*\\n)+)`, 'm').exec(yaml)?.[2] ?? '';
    const field = (key: string) => Number(new RegExp(`${key}: (\\d+)`).exec(block)?.[1]);
    return { path: /path: ([^\s,}]+)/.exec(block)?.[1], field };
  };
  // The variables the Deployment sets, over the defaults (and validated as the server would).
  const env = Object.fromEntries(
    [...yaml.matchAll(/name: ([A-Z][A-Z0-9_]*), value: "([^"]*)"/g)].map((m) => [m[1], m[2]]),
  );
  const defaults = loadConfig(env);

  it('guards /metrics and /healthz/ticks with METRICS_PORT on a port of its own', () => {
    // The secret holds DATABASE_URL, so HOST defaults to 0.0.0.0: this env must pass the guard.
    const withDatabase = { ...env, DATABASE_URL: 'postgres://app@db/app' };
    const { port } = loadInternalEndpointsConfig(withDatabase);
    expect(port).toBeDefined();
    expect(yaml).toMatch(new RegExp(`name: metrics, containerPort: ${port} `));
    expect(yaml).toContain(`prometheus.io/port: "${port}"`);
    expect(yaml).not.toContain('METRICS_PUBLIC');
  });

  it('outlasts the shutdown budget and starts within the migration window', () => {
    expect(Object.keys(env)).toContain('SHUTDOWN_DELAY_MS');
    expect(defaults.shutdownDelayMs).toBeLessThan(defaults.shutdownTimeoutMs);
    const grace = Number(/terminationGracePeriodSeconds: (\d+)/.exec(yaml)?.[1]);
    // Past the budget each remaining shutdown stage still gets a second (packages/platform/src/lifecycle/shutdown.ts).
    expect(grace).toBeGreaterThanOrEqual(defaults.shutdownTimeoutMs / 1000 + 5);
    const startup = probe('startupProbe');
    expect(startup.path).toBe('/livez');
    expect(startup.field('failureThreshold') * startup.field('periodSeconds')).toBeGreaterThan(
      (defaults.probeTimeoutMs + defaults.migrationLockTimeoutMs) / 1000,
    );
    expect(probe('livenessProbe').path).toBe('/livez');
    const readiness = probe('readinessProbe');
    expect(readiness.path).toBe('/readyz');
    expect(readiness.field('timeoutSeconds')).toBeGreaterThan(defaults.probeTimeoutMs / 1000);
  });
});
