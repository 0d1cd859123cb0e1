// Our queue without Xero, in a child process of bench/queue.ts. Each `go` ticks back to back until a
// claim comes back empty, in one of two modes:
//   real    — the real pushDueInvoices (claim statement, connection lookup, token decryption, one fenced
//             settle per row) with a Xero client that answers `ok` at once and a limiter that never
//             says wait;
//   batched — a what-if, not our code: the same claim statement, then one fenced UPDATE for the whole
//             batch instead of one per row (no connection lookup, no decryption).

import { type PushTickDeps, pushDueInvoices } from '../../src/app/ticks/push-invoices.js';
import type { XeroClient } from '../../src/app/xero/client.js';
import { TenantLimiter } from '../../src/app/xero/tenant-limiter.js';
import type { DatabaseHandle } from '../../src/platform/db/handle.js';
import { createLogger } from '../../src/platform/log.js';
import { openDatabase, testBox } from '../../test/support/ticks.js';
import { childConfig, serve } from './queue-child.js';

interface Config {
  url: string;
  owner: string;
}

const config = childConfig<Config>();
const log = createLogger('warn');

// pushDueInvoices calls nothing but putInvoice; the rest of the client is out of this benchmark.
const noopXero = {
  putInvoice: async (_token: string, _tenant: string, key: string) => ({
    kind: 'ok' as const,
    invoiceId: key,
  }),
} satisfies Pick<XeroClient, 'putInvoice'> as unknown as XeroClient;

// The statement pushDueInvoices sends (Drizzle's rendering, parameters aside).
const CLAIM = `
  update "invoice_pushes" set "lease_owner" = $1, "lease_expires_at" = now() + $2::interval,
    "attempts" = "invoice_pushes"."attempts" + 1, "updated_at" = now()
  where "invoice_pushes"."id" in (
    select "id" from "invoice_pushes"
    where ("invoice_pushes"."status" in ('queued', 'failed') and "invoice_pushes"."next_attempt_at" <= now()
      and (("invoice_pushes"."lease_expires_at" is null or "invoice_pushes"."lease_expires_at" < now())
        or "invoice_pushes"."lease_owner" = $1))
    order by "invoice_pushes"."next_attempt_at" limit $3 for update skip locked)
  returning "id", "connection_id", "payload", "attempts"`;

const SETTLE_ALL = `
  update "invoice_pushes" set "status" = 'pushed', "xero_invoice_id" = "id"::text, "last_error" = null,
    "lease_owner" = null, "lease_expires_at" = null, "updated_at" = now()
  where "id" = any($1::uuid[]) and "lease_owner" = $2`;

async function batchedTick(handle: DatabaseHandle, owner: string, batchSize: number): Promise<number> {
  const claimed = await handle.pool.query<{ id: string }>(CLAIM, [owner, '60000 milliseconds', batchSize]);
  if (claimed.rows.length > 0) await handle.pool.query(SETTLE_ALL, [claimed.rows.map((r) => r.id), owner]);
  return claimed.rows.length;
}

await serve(
  async () => {
    const handle = await openDatabase(config.url, log);
    const deps: PushTickDeps = {
      xero: noopXero,
      box: await testBox(),
      limiter: new TenantLimiter({
        concurrent: Number.POSITIVE_INFINITY,
        perMinute: Number.POSITIVE_INFINITY,
      }),
      owner: config.owner,
      maxAttempts: 12,
      batchSize: 1,
      leaseMs: 60_000,
      backoff: { baseMs: 30_000, maxMs: 3_600_000 },
      log,
    };
    // Warm the pool and both statement paths on an empty queue (nothing is due yet).
    await pushDueInvoices(handle.db, deps);
    await batchedTick(handle, config.owner, 1);
    return { handle, deps };
  },
  async ({ handle, deps }, go) => {
    const batchSize = Number(go.batchSize);
    const run = { ...deps, batchSize };
    const totals = { ticks: 0, claimed: 0, pushed: 0, deferred: 0, tick_ms: [] as number[] };
    const started = performance.now();
    for (;;) {
      const t0 = performance.now();
      let claimed: number;
      if (go.mode === 'batched') {
        claimed = await batchedTick(handle, deps.owner, batchSize);
        totals.pushed += claimed;
      } else {
        const r = await pushDueInvoices(handle.db, run);
        claimed = r.claimed;
        totals.pushed += r.pushed;
        totals.deferred += r.deferred;
      }
      totals.ticks += 1;
      totals.claimed += claimed;
      if (claimed === 0) break;
      totals.tick_ms.push(Math.round(performance.now() - t0));
    }
    return { ms: Math.round(performance.now() - started), ...totals };
  },
  ({ handle }) => handle.close(),
);
