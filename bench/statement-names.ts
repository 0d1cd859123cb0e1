// What naming the ingress insert buys: createPush (src/app/invoices/store.ts) as a named prepared
// statement (direct connections, session poolers) against the unnamed statement it becomes behind a
// transaction-mode pooler (docs/poolers.md), on one pg pool against one throwaway cluster, rounds
// alternated so drift hits both alike. Reports inserts per second and the ratio; never fails.
// `npx tsx bench/statement-names.ts`; knobs: BENCH_ROUNDS (5), BENCH_INSERTS (1000 per round and mode).

import type { Database } from '@honest-health/platform';
import { createLogger, registerStatementPolicy } from '@honest-health/platform';
import { migrate } from '@honest-health/platform/db';
import { drizzle } from 'drizzle-orm/node-postgres';
import pg from 'pg';
import { createPush } from '../src/app/invoices/store.js';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrganization } from '../src/app/organizations.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { INVOICE } from './support/ingress-harness.js';
import { intEnv, printResults, progress } from './support/report.js';
import { median, round2 } from './support/stats.js';

const PAYLOAD = { tenantId: undefined, payloadText: JSON.stringify(INVOICE) };

const ROUNDS = intEnv('BENCH_ROUNDS', 5);
const INSERTS = intEnv('BENCH_INSERTS', 1000);
const CONCURRENCY = 10;

const cluster = await startCluster();
try {
  const url = await freshDatabase(cluster, 'bench');
  const pool = new pg.Pool({ connectionString: url, max: CONCURRENCY });
  const log = createLogger('warn');
  await migrate(
    {
      db: drizzle({ client: pool }) as unknown as Database,
      query: (text, params) => pool.query(text, params) as never,
      withSession: async (fn) => {
        const client = await pool.connect();
        try {
          return await fn(client as never);
        } finally {
          client.release();
        }
      },
      stats: () => ({ total: 0, idle: 0, waiting: 0 }),
      end: () => pool.end(),
    },
    migrations,
    log,
  );
  // Two Drizzle instances on one pool: one keeps names, the other never names a statement.
  const named = drizzle({ client: pool }) as unknown as Database;
  const unnamed = drizzle({ client: pool }) as unknown as Database;
  registerStatementPolicy(
    named,
    () => true,
    () => {},
  );
  registerStatementPolicy(
    unnamed,
    () => false,
    () => {},
  );
  const org = await createOrganization(named, 'bench');
  let seq = 0;
  const run = async (db: Database) => {
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: CONCURRENCY }, async () => {
        while (next++ < INSERTS) await createPush(db, org.id, `k${++seq}`, PAYLOAD, 'h');
      }),
    );
    return INSERTS / ((performance.now() - started) / 1000);
  };
  await run(named); // warm-up: JIT, plan caches, connections
  await run(unnamed);
  const rates = { named: [] as number[], unnamed: [] as number[] };
  for (let round = 0; round < ROUNDS; round++) {
    for (const mode of round % 2 === 0 ? (['named', 'unnamed'] as const) : (['unnamed', 'named'] as const)) {
      rates[mode].push(await run(mode === 'named' ? named : unnamed));
    }
    progress(
      `round ${round + 1}: named ${Math.round(rates.named.at(-1) ?? 0)}/s, unnamed ${Math.round(rates.unnamed.at(-1) ?? 0)}/s`,
    );
  }
  await pool.end();
  const ratio = median(rates.unnamed) / median(rates.named);
  printResults(
    'statement-names',
    {
      named_per_s: Math.round(median(rates.named)),
      unnamed_per_s: Math.round(median(rates.unnamed)),
      unnamed_vs_named: round2(ratio),
    },
    { unnamed_vs_named: ratio },
  );
} finally {
  await cluster.remove();
}
