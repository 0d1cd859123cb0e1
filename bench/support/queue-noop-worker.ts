// Our queue without Xero, in a child process of bench/queue.ts. Each `go` ticks back to back until a
// claim comes back empty, in one of two modes:
//   real    — the real pushDueInvoices (the claim statement with its connection join, the access
//             tokens from the process's cache, the shared budget, toXeroInvoice, one fenced settle
//             statement per batch) with a Xero client that answers `ok` at once. The budget's state
//             is read and written on every claim as in production, and keeps Xero's 5 in flight per
//             tenant; its minute, day and app limits are lifted, because the rounds send the same 200
//             tenants 50 pushes each several times a minute.
//   batched — a what-if, not our code: the same claim statement, then one fenced UPDATE by id for the
//             whole batch (no tokens, no limiter, no per-push outcome): the floor our statements allow.
//   unbudgeted — a what-if, not our code: our table claimed as pg-boss claims its own (the oldest due
//             rows, FOR UPDATE SKIP LOCKED, one UPDATE), no budget at all, then the same one UPDATE by
//             id: what our rows and indexes cost, so that the rest of the gap is the budget's.

import { createLogger } from '@honest-health/platform';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { AccessTokenCache } from '../../src/app/connections/grants.js';
import { XERO_BUDGET } from '../../src/app/push/budget.js';
import { claimPushes } from '../../src/app/push/claim.js';
import { type PushTickDeps, pushDueInvoices } from '../../src/app/push/tick.js';
import type { XeroClient } from '../../src/app/xero/client.js';
import { openDatabase, testBox } from '../../test/support/ticks.js';
import { childConfig, serve } from './queue-child.js';

interface Config {
  url: string;
  owner: string;
}

const config = childConfig<Config>();
const log = createLogger('warn');

// pushDueInvoices calls nothing but putInvoice and marker (lookups need a push in doubt); the rest of
// the client is out of this benchmark.
const noopXero = {
  putInvoice: async (_token: string, _tenant: string, key: string) => ({
    kind: 'ok' as const,
    invoiceId: key,
  }),
  marker: (pushId: string) => `http://127.0.0.1/api/invoices/${pushId}`,
} satisfies Pick<XeroClient, 'putInvoice' | 'marker'> as unknown as XeroClient;

const SETTLE_ALL = `
  update "invoice_pushes" set "status" = 'pushed', "xero_invoice_id" = "id"::text, "last_error" = null,
    "lease_owner" = null, "lease_expires_at" = null, "updated_at" = now()
  where "id" = any($1::uuid[]) and "lease_owner" = $2`;

// Limits no drain here reaches, over Xero's real windows: the counters are bounded whatever they hold.
const LIFTED = { ...XERO_BUDGET, perMinute: 1e9, perDay: 1e9, appPerMinute: 1e9 };

// The what-if's one UPDATE gives no slots back (the real settle does): it claims with the in-flight
// limit lifted, and with a 1 s lease, so the slots it leaves behind (stamped with the lease expiry) are
// gone before the next run on the same tenants starts.
const WHAT_IF = { ...LIFTED, concurrent: 1e9 };
const WHAT_IF_LEASE_MS = 1000;

const CLAIM_UNBUDGETED = `
  with next as (
    select "id" from "invoice_pushes"
    where "status" in ('queued', 'failed') and "next_attempt_at" <= now()
      and ("lease_expires_at" is null or "lease_expires_at" < now())
    order by "next_attempt_at" limit $1 for update skip locked)
  update "invoice_pushes" p set "lease_owner" = $2, "lease_expires_at" = now() + interval '1 minute',
    "attempts" = p."attempts" + 1, "updated_at" = now()
  from next where p."id" = next."id" returning p."id"`;

async function unbudgetedTick(handle: DatabaseHandle, owner: string, batchSize: number): Promise<number> {
  const { rows } = await handle.pool.query<{ id: string }>(CLAIM_UNBUDGETED, [batchSize, owner]);
  if (rows.length > 0) await handle.pool.query(SETTLE_ALL, [rows.map((r) => r.id), owner]);
  return rows.length;
}

async function batchedTick(handle: DatabaseHandle, owner: string, batchSize: number): Promise<number> {
  const { pushes: claimed } = await claimPushes(handle.db, {
    owner,
    leaseMs: WHAT_IF_LEASE_MS,
    batchSize,
    budget: WHAT_IF,
  });
  if (claimed.length > 0) await handle.pool.query(SETTLE_ALL, [claimed.map((r) => r.id), owner]);
  return claimed.length;
}

await serve(
  async () => {
    const handle = await openDatabase(config.url, log);
    const deps: PushTickDeps = {
      xero: noopXero,
      box: await testBox(),
      budget: LIFTED,
      // Kept across runs, as the server keeps it across ticks.
      tokens: new AccessTokenCache(),
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
    await unbudgetedTick(handle, config.owner, 1);
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
      if (go.mode === 'batched' || go.mode === 'unbudgeted') {
        claimed = await (go.mode === 'batched' ? batchedTick : unbudgetedTick)(handle, deps.owner, batchSize);
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
