// What bench/ingress.ts needs around the load runs: the invoice it submits, the baseline process, a
// migrated database for it, row counts, and the CPU time of a PostgreSQL cluster's processes.
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { migrations } from '../../src/app/migrations.gen.js';
import { type PgCompatiblePool, wrapPgCompatiblePool } from '../../src/platform/db/drivers/pg-compatible.js';
import { migrate } from '../../src/platform/db/migrate.js';
import { createLogger } from '../../src/platform/log.js';
import { freePort } from '../../test/support/ports.js';
import { repoRoot } from '../../test/support/server.js';
import { pollUntil200 } from './ready.js';

/** A realistic invoice with three line items; it passes our validation as it stands. */
export const INVOICE = {
  contact: { name: 'Harbourside Joinery Ltd' },
  date: '2026-11-29',
  dueDate: '2026-12-20',
  currency: 'NZD',
  reference: 'PO-88412 / site 3',
  lineItems: [
    {
      description: 'Oak veneer panels, 2400 x 1200 x 18 mm',
      quantity: '12',
      unitAmount: '184.50',
      accountCode: '200',
    },
    { description: 'Installation labour (hours)', quantity: '7.5', unitAmount: '95.00', accountCode: '210' },
    { description: 'Delivery, Auckland metro', quantity: '1', unitAmount: '65.00', accountCode: '220' },
  ],
};

export interface BareIngress {
  readonly port: number;
  readonly url: string;
  readonly child: ChildProcess;
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export interface BareIngressOptions {
  databaseUrl: string;
  organizationId: string;
  poolMax: number;
  /** Extra Node flags (e.g. --cpu-prof), before the script. */
  nodeArgs?: string[];
}

/** Spawns bench/support/ingress-bare.ts with the same Node flags as our server; resolves once it answers. */
export async function spawnBareIngress(options: BareIngressOptions): Promise<BareIngress> {
  const port = await freePort();
  const child = spawn(
    process.execPath,
    [
      '--enable-source-maps',
      ...(options.nodeArgs ?? []),
      '--import',
      'tsx',
      resolve(repoRoot, 'bench/support/ingress-bare.ts'),
    ],
    {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH,
        HOST: '127.0.0.1',
        PORT: String(port),
        DATABASE_URL: options.databaseUrl,
        ORGANIZATION_ID: options.organizationId,
        POOL_MAX: String(options.poolMax),
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  live.add(child);
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString('utf8')).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const exited = new Promise<void>((done) =>
    child.once('exit', () => {
      live.delete(child);
      done();
    }),
  );
  const url = `http://127.0.0.1:${port}`;
  const server: BareIngress = {
    port,
    url,
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
  try {
    await pollUntil200(`${url}/livez`, { timeoutMs: 30_000, exited, describe: () => output });
  } catch (err) {
    await server.stop();
    throw err;
  }
  return server;
}

/** Applies the bundled migrations the way our server does at boot (same code, same advisory lock). */
export async function migrateDatabase(url: string): Promise<void> {
  const pool = new pg.Pool({ connectionString: url, max: 1 });
  const log = createLogger('warn');
  try {
    const wrapped = wrapPgCompatiblePool(
      pool as unknown as PgCompatiblePool,
      drizzle({ client: pool }),
      'app',
      log,
    );
    await migrate(wrapped, migrations, log);
  } finally {
    await pool.end();
  }
}

/** Rows in invoice_pushes. */
export async function countPushes(url: string): Promise<number> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 });
  client.on('error', () => {});
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT count(*)::text AS n FROM invoice_pushes');
    return Number(rows[0]?.n ?? Number.NaN);
  } finally {
    await client.end().catch(() => {});
  }
}

let ticksPerSecond: number | undefined;

function clockTicks(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** CPU seconds (user + system) used so far by each process of a cluster, by process id. */
export type ClusterCpu = Map<number, number>;

/**
 * Samples the CPU time of a cluster's postmaster and its children (backends, WAL writer,
 * checkpointer…), or undefined without /proc.
 */
export function clusterCpu(dataDir: string): ClusterCpu | undefined {
  try {
    const postmaster = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
    if (!Number.isSafeInteger(postmaster)) return undefined;
    const cpu: ClusterCpu = new Map();
    for (const entry of readdirSync('/proc')) {
      if (!/^\d+$/.test(entry)) continue;
      let stat: string;
      try {
        stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      } catch {
        continue; // exited while we looked
      }
      // After the parenthesised command name: state (3), ppid (4), …, utime (14), stime (15).
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const pid = Number(entry);
      if (pid !== postmaster && Number(fields[1]) !== postmaster) continue;
      cpu.set(pid, (Number(fields[11]) + Number(fields[12])) / clockTicks());
    }
    return cpu;
  } catch {
    return undefined;
  }
}

/**
 * CPU seconds the cluster used between two samples, over the processes alive at the second one (a
 * process started in between counts from zero). A backend that exited in between (a short-lived
 * client's) is left out: its time is gone from /proc, and counting its earlier time would subtract it.
 */
export function clusterCpuDelta(before: ClusterCpu, after: ClusterCpu): number {
  let seconds = 0;
  for (const [pid, now] of after) seconds += now - (before.get(pid) ?? 0);
  return seconds;
}
