// Embedded-database benchmark: `npm start` with nothing configured (development mode on PGlite, from an
// empty directory: initdb, migrations, the sandbox) started with Node's flags alone and with the
// embedded flags package.json adds (EMBEDDED_NODE_FLAGS: no wasm tier-up), alternated round by round.
// Per start: the server process's CPU (user + sys, every thread) and wall time until /readyz answers
// 200, then the CPU of BENCH_EMBEDDED_LISTS authenticated invoice-list GETs, the work after boot.
// Reports figures and never fails on them. Run: `npm run bench:embedded`. Knobs: BENCH_ROUNDS (3),
// BENCH_EMBEDDED_LISTS (200).
import { loadavg } from 'node:os';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  EMBEDDED_NODE_FLAGS,
  NODE_FLAGS,
  repoRoot,
  type ServerProcess,
  spawnServer,
  startEntry,
} from '../test/support/server.js';
import { serverDump, stopServer, trackServer } from './support/boot.js';
import { cpuSeconds } from './support/cpu.js';
import { removeTempDir, runBench, tempDir } from './support/lifecycle.js';
import { pollUntil200 } from './support/ready.js';
import { intEnv, printResults, progress, table } from './support/report.js';
import { median, round2, round3 } from './support/stats.js';

const ROUNDS = intEnv('BENCH_ROUNDS', 3);
const LISTS = intEnv('BENCH_EMBEDDED_LISTS', 200);
const loader = pathToFileURL(resolve(repoRoot, 'node_modules/tsx/dist/loader.mjs')).href;

type Name = 'default' | 'embedded';

interface Start {
  readyCpuS: number;
  readyMs: number;
  listCpuMsPerReq: number;
}

async function start(name: Name): Promise<Start> {
  const cwd = tempDir('bench-embedded-');
  const flags = name === 'embedded' ? EMBEDDED_NODE_FLAGS : [];
  const started = performance.now();
  const server: ServerProcess = await spawnServer({
    cwd,
    command: process.execPath,
    args: [...NODE_FLAGS, ...flags, '--import', loader, startEntry],
    // Only what `npm start` in a shell has: development mode makes its own key and organization.
    env: { TOKEN_ENCRYPTION_KEY: undefined, TSX_TSCONFIG_PATH: resolve(repoRoot, 'tsconfig.json') },
    scanned: false,
  });
  trackServer(server);
  try {
    await pollUntil200(`${server.url}/readyz`, {
      intervalMs: 50,
      timeoutMs: 180_000,
      exited: server.exited,
      describe: () => serverDump(server),
    });
    const readyMs = performance.now() - started;
    const readyCpuS = cpuSeconds(server.child.pid) ?? Number.NaN;
    const line = server.logs.find((l) => l.msg.startsWith('development mode:'));
    const key = /(hh_live_[A-Za-z0-9_-]+)/.exec(line?.msg ?? '')?.[1];
    if (!key) throw new Error(`no development key printed\n${serverDump(server)}`);
    const headers = { authorization: `Bearer ${key}` };
    const before = cpuSeconds(server.child.pid) ?? Number.NaN;
    for (let i = 0; i < LISTS; i++) {
      const res = await fetch(`${server.url}/api/invoices`, { headers });
      if (res.status !== 200) throw new Error(`GET /api/invoices: ${res.status}`);
      await res.arrayBuffer();
    }
    const after = cpuSeconds(server.child.pid) ?? Number.NaN;
    return { readyCpuS, readyMs, listCpuMsPerReq: ((after - before) * 1000) / LISTS };
  } finally {
    await stopServer(server);
    removeTempDir(cwd);
  }
}

async function main(): Promise<void> {
  const loadBefore = loadavg()[0] ?? 0;
  progress(`embedded bench: ${ROUNDS} rounds, ${LISTS} list GETs a start`);
  const runs: Record<Name, Start[]> = { default: [], embedded: [] };
  for (let round = 1; round <= ROUNDS; round++) {
    // Alternate which goes first, so a neighbour's burst does not always land on the same side.
    const order: Name[] = round % 2 === 1 ? ['default', 'embedded'] : ['embedded', 'default'];
    for (const name of order) {
      const run = await start(name);
      runs[name].push(run);
      progress(
        `round ${round}/${ROUNDS} ${name.padEnd(8)} ready ${round2(run.readyCpuS)} s CPU in ${Math.round(run.readyMs)} ms, ` +
          `lists ${round3(run.listCpuMsPerReq)} ms CPU a GET, load ${round2(loadavg()[0] ?? 0)}`,
      );
    }
  }
  const med = (name: Name, pick: (s: Start) => number) => median(runs[name].map(pick));
  const ratio = (pick: (s: Start) => number) => med('embedded', pick) / med('default', pick);
  const figures = {
    readyCpuS: { default: med('default', (s) => s.readyCpuS), embedded: med('embedded', (s) => s.readyCpuS) },
    readyMs: { default: med('default', (s) => s.readyMs), embedded: med('embedded', (s) => s.readyMs) },
    listCpuMsPerReq: {
      default: med('default', (s) => s.listCpuMsPerReq),
      embedded: med('embedded', (s) => s.listCpuMsPerReq),
    },
  };
  console.log(
    table([
      ['median of the rounds', "Node's flags", 'embedded flags', 'embedded ÷ default'],
      ...(
        [
          ['CPU to ready, s', (s: Start) => s.readyCpuS],
          ['wall to ready, ms', (s: Start) => s.readyMs],
          ['CPU a list GET, ms', (s: Start) => s.listCpuMsPerReq],
        ] as const
      ).map(([label, pick]) => [
        label,
        String(round3(med('default', pick))),
        String(round3(med('embedded', pick))),
        String(round3(ratio(pick))),
      ]),
    ]),
  );
  printResults(
    'embedded',
    {
      rounds: ROUNDS,
      lists: LISTS,
      flags: EMBEDDED_NODE_FLAGS,
      load: [loadBefore, loadavg()[0]],
      runs,
      figures,
    },
    {
      ready_cpu_vs_default: ratio((s) => s.readyCpuS),
      ready_wall_vs_default: ratio((s) => s.readyMs),
      list_cpu_vs_default: ratio((s) => s.listCpuMsPerReq),
      ready_cpu_s: figures.readyCpuS.embedded,
      default_ready_cpu_s: figures.readyCpuS.default,
    },
  );
}

await runBench(main);
