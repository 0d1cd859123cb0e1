// Summarises a V8 CPU profile (`node --cpu-prof`) of a server under the ingress load: main-thread time
// per request, split into the stages of handling an invoice. Frames of the bundled server are mapped back
// to their source files through dist/node.js.map.
//
// Each sample goes to the innermost frame on its stack that belongs to a stage: Node's own modules and
// V8 builtins (JSON.parse, JSON.stringify…) count for the package or file that called them, so a socket
// write made by node-postgres is database time and one made by the HTTP adapter is HTTP time. Two
// exceptions are stages of their own: WebCrypto (split by whether the API-key hash asked for it) and
// the machinery of a full web Request (undici, web streams, AbortSignal).
//
// V8 samples wall-clock time: when the main thread is preempted (another process, or a thread it just
// woke), the wait counts for whatever it was doing. Read the figures on a quiet machine.
import { readFileSync } from 'node:fs';
import { SourceMap } from 'node:module';
import { dirname, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { repoRoot } from '../../test/support/server.js';

interface CallFrame {
  functionName: string;
  url: string;
  lineNumber: number;
  columnNumber: number;
}

interface ProfileNode {
  id: number;
  callFrame: CallFrame;
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  /** Microseconds since the previous sample. */
  timeDeltas: number[];
}

export interface ProfileSummary {
  /** Requests answered during the profiled run: the divisor of every per-request figure. */
  requests: number;
  /** Main-thread time during the last run (see summariseProfile), minus idle, per request. */
  busyUsPerRequest: number;
  stages: { stage: string; usPerRequest: number }[];
  /** The frames with the most self time in that window. */
  topFrames: { frame: string; usPerRequest: number }[];
}

interface Frame {
  fn: string;
  /** Repository-relative source file (through the source map when there is one), or Node's module id. */
  file: string;
  line: number;
  /** node_modules package, if any. */
  pkg: string | undefined;
  /** Node's own modules and V8 builtins. */
  core: boolean;
}

export const STAGES = {
  http: 'HTTP: node http + @hono/node-server adapter',
  webRequest: 'HTTP: a full web Request (undici, web streams, AbortSignal)',
  hono: 'hono: routing, middleware, context',
  response: 'response: acceptedView + jsonAnswer or c.json (JSON.stringify)',
  handler: 'route handler, own code (JSON.parse, header checks, JSON.stringify for the hash)',
  auth: 'auth: Bearer parse + registry lookup',
  authHash: 'auth: API-key sha256 (WebCrypto + hex)',
  requestHash: 'request hash: sha256 (WebCrypto) + hex',
  zod: 'validation: zod',
  drizzle: 'database: Drizzle (query building, row mapping)',
  pg: 'database: node-postgres (protocol, pool, type parsing)',
  store: 'database: our store + pool wrappers',
  gc: 'GC',
  program: 'V8 / native (unattributed)',
  core: 'Node core, no package on the stack',
  other: 'other',
} as const;

const PG_PACKAGES = new Set([
  'pg',
  'pg-pool',
  'pg-protocol',
  'pg-types',
  'pg-connection-string',
  'postgres-array',
  'postgres-bytea',
  'postgres-date',
  'postgres-interval',
]);

// Within a run the main thread is never mostly idle for this long; between runs it is.
const QUIET_US = 200_000;
const QUIET_IDLE_SHARE = 0.8;

const WEB_REQUEST =
  /^node:internal\/(deps\/undici|webstreams\/|abort_controller$|event_target$|worker\/js_transferable$)/;

const sourceMaps = new Map<string, SourceMap | null>();

function sourceMapFor(path: string): SourceMap | null {
  let map = sourceMaps.get(path);
  if (map === undefined) {
    try {
      map = new SourceMap(JSON.parse(readFileSync(`${path}.map`, 'utf8')));
    } catch {
      map = null;
    }
    sourceMaps.set(path, map);
  }
  return map;
}

function toFrame({ functionName, url, lineNumber, columnNumber }: CallFrame): Frame {
  const fn = functionName || '(anonymous)';
  if (!url.startsWith('file://')) {
    // '(garbage collector)', '(program)', '(idle)' and '(root)' are V8's own entries, not code.
    const core = !/^\((garbage collector|program|idle|root)\)$/.test(functionName);
    return { fn, file: url, line: lineNumber + 1, pkg: undefined, core };
  }
  const path = fileURLToPath(url);
  const pkg = /node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(path)?.[1];
  let file = relative(repoRoot, path);
  let line = lineNumber + 1;
  if (pkg === undefined && path.endsWith('.js')) {
    const entry = sourceMapFor(path)?.findEntry(lineNumber, columnNumber);
    if (entry && 'originalSource' in entry) {
      file = relative(repoRoot, resolve(dirname(path), entry.originalSource));
      line = entry.originalLine + 1;
    }
  }
  return { fn, file, line, pkg, core: false };
}

/** The stage a frame belongs to, given the frames that called it; undefined: look further out. */
function stageOf(frame: Frame, callers: readonly Frame[]): string | undefined {
  const { fn, file, pkg } = frame;
  if (fn === '(garbage collector)') return STAGES.gc;
  if (fn === '(program)') return STAGES.program;
  if (file.startsWith('node:internal/crypto') || file === 'node:crypto' || file === 'src/app/api-keys.ts') {
    const forAuth = callers.some((c) => c.fn === 'hashApiKey' || c.file === 'src/app/auth.ts');
    return forAuth || fn === 'hashApiKey' ? STAGES.authHash : STAGES.requestHash;
  }
  // What @hono/node-server builds only when something asks for more than its lightweight request:
  // hono's bodyLimit reads `c.req.raw.body`, which turns the request into a real one, stream and all.
  if (WEB_REQUEST.test(file)) return STAGES.webRequest;
  if (frame.core) return undefined;
  if (pkg === 'zod' || file === 'src/app/invoices/input.ts') return STAGES.zod;
  if (pkg === 'drizzle-orm') return STAGES.drizzle;
  if (pkg !== undefined && PG_PACKAGES.has(pkg)) return STAGES.pg;
  if (pkg === '@hono/node-server') return STAGES.http;
  if (pkg === 'hono') return file.endsWith('/context.js') && fn === 'json' ? STAGES.response : STAGES.hono;
  if (file === 'src/app/invoices/view.ts' || file === 'packages/platform/src/http/answer-headers.ts')
    return STAGES.response;
  if (file === 'src/app/auth.ts' || file === 'src/app/api-key-registry.ts') return STAGES.auth;
  if (file === 'src/app/invoices/store.ts' || file.startsWith('packages/platform/src/db/'))
    return STAGES.store;
  if (file.startsWith('src/') || file.startsWith('packages/') || file.startsWith('bench/'))
    return STAGES.handler;
  return undefined;
}

/** No stage on the whole stack: Node's HTTP and socket machinery, or anything else in core. */
function fallbackStage(stack: readonly Frame[]): string {
  const leaf = stack[0];
  if (leaf === undefined || leaf.fn === '(root)') return STAGES.other;
  const http = stack.some((f) =>
    /^node:(_http_|net$|internal\/(http|stream_base_commons|streams)|stream$)/.test(f.file),
  );
  if (http) return STAGES.http;
  return stack.some((f) => f.core) ? STAGES.core : STAGES.other;
}

/**
 * Summarises the last run in the profile: the stretch of request handling that ends with the last
 * sample inside Hono and starts after the idle pause before it. `requests`: how many it answered.
 */
export function summariseProfile(path: string, requests: number): ProfileSummary {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  const nodes = new Map(profile.nodes.map((n) => [n.id, n]));
  const parents = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parents.set(child, node.id);
  const frames = new Map(profile.nodes.map((n) => [n.id, toFrame(n.callFrame)]));

  // Per node: its stack (leaf first), its stage, whether Hono is on it.
  const stacks = new Map<number, Frame[]>();
  const stackOf = (id: number): Frame[] => {
    let stack = stacks.get(id);
    if (stack === undefined) {
      stack = [];
      for (let at: number | undefined = id; at !== undefined; at = parents.get(at)) {
        const frame = frames.get(at);
        if (frame) stack.push(frame);
      }
      stacks.set(id, stack);
    }
    return stack;
  };
  const stageCache = new Map<number, string>();
  const stageFor = (id: number): string => {
    let stage = stageCache.get(id);
    if (stage === undefined) {
      const stack = stackOf(id);
      for (let i = 0; i < stack.length && stage === undefined; i++) {
        stage = stageOf(stack[i] as Frame, stack.slice(i + 1));
      }
      stage ??= fallbackStage(stack);
      stageCache.set(id, stage);
    }
    return stage;
  };
  const inHono = (id: number) => stackOf(id).some((f) => f.pkg === 'hono');

  // A sample lasts until the next one.
  const { samples, timeDeltas } = profile;
  const duration = (i: number) => timeDeltas[i + 1] ?? 0;
  const isIdle = (i: number) => nodes.get(samples[i] as number)?.callFrame.functionName === '(idle)';
  // The window: the last run. From the last sample inside Hono, back to the first stretch of
  // QUIET_US in which the main thread was mostly idle (the pause before the run: counting rows,
  // settling). Short blips, such as our api-key registry refresh, do not end the pause.
  let last = samples.length - 1;
  while (last > 0 && !inHono(samples[last] as number)) last--;
  let first = last;
  // The stretch before `first` that looks quiet so far.
  let quietIdle = 0;
  let quietTotal = 0;
  for (let i = last; i >= 0 && quietTotal < QUIET_US; i--) {
    quietTotal += duration(i);
    if (isIdle(i)) quietIdle += duration(i);
    if (quietIdle < quietTotal * QUIET_IDLE_SHARE) {
      // Not quiet after all: all of it belongs to the run.
      first = i;
      quietIdle = 0;
      quietTotal = 0;
    }
  }

  const byStage = new Map<string, number>();
  const bySelf = new Map<string, number>();
  let busy = 0;
  for (let i = first; i <= last; i++) {
    const id = samples[i] as number;
    if (isIdle(i)) continue;
    const us = duration(i);
    busy += us;
    const stage = stageFor(id);
    byStage.set(stage, (byStage.get(stage) ?? 0) + us);
    const f = frames.get(id) as Frame;
    const label = `${f.fn} ${f.file ? `${f.pkg ? `${f.pkg}: ` : ''}${f.file.replace(/.*node_modules\/(@[^/]+\/)?[^/]+\//, '')}:${f.line}` : '(native)'}`;
    bySelf.set(label, (bySelf.get(label) ?? 0) + us);
  }
  const perRequest = (us: number) => Math.round((us / Math.max(1, requests)) * 10) / 10;
  return {
    requests,
    busyUsPerRequest: perRequest(busy),
    stages: [...byStage]
      .sort((a, b) => b[1] - a[1])
      .map(([stage, us]) => ({ stage, usPerRequest: perRequest(us) })),
    topFrames: [...bySelf]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 12)
      .map(([frame, us]) => ({ frame, usPerRequest: perRequest(us) })),
  };
}
