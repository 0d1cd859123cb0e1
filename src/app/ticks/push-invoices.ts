import { and, eq, inArray, isNull, lt, lte, or, sql } from 'drizzle-orm';
import { poisonReason } from '../../platform/db/poison.js';
import type { Database } from '../../platform/db/types.js';
import type { Logger } from '../../platform/log.js';
import type { SecretBox } from '../../platform/secret-box.js';
import type { InvoiceInput } from '../invoices/input.js';
import { invoicePushes, xeroConnections } from '../schema.js';
import { type PushOutcome, toXeroInvoice, type XeroClient } from '../xero/client.js';
import { tokenContext } from '../xero/connections.js';
import type { TenantLimiter } from '../xero/tenant-limiter.js';

export interface PushTickDeps {
  xero: XeroClient;
  box: SecretBox;
  limiter: TenantLimiter;
  /** This process: leases it holds are its own, and a re-run after a failover may take them back. */
  owner: string;
  maxAttempts: number;
  batchSize: number;
  leaseMs: number;
  backoff: { baseMs: number; maxMs: number };
  log: Logger;
}

export interface PushTickResult {
  claimed: number;
  pushed: number;
  retrying: number;
  dead: number;
  deferred: number;
}

const leaseExpired = or(isNull(invoicePushes.leaseExpiresAt), lt(invoicePushes.leaseExpiresAt, sql`now()`));

/**
 * Claims due pushes with one statement (UPDATE ... WHERE id IN (SELECT ... FOR UPDATE SKIP LOCKED))
 * that writes a lease, pushes each to Xero under its stored idempotency key (the push id), and
 * records each outcome with one statement fenced on the lease. Replicas never push the same
 * invoice at once, and the same statements run over every driver, Neon's HTTP one included.
 */
export async function pushDueInvoices(db: Database, deps: PushTickDeps): Promise<PushTickResult> {
  const due = db
    .select({ id: invoicePushes.id })
    .from(invoicePushes)
    .where(
      and(
        // Literal, not bound: it must match the partial index's predicate for the planner to use it.
        sql`${invoicePushes.status} in ('queued', 'failed')`,
        lte(invoicePushes.nextAttemptAt, sql`now()`),
        or(leaseExpired, eq(invoicePushes.leaseOwner, deps.owner)),
      ),
    )
    .orderBy(invoicePushes.nextAttemptAt)
    .limit(deps.batchSize)
    .for('update', { skipLocked: true });
  const claimed = await db
    .update(invoicePushes)
    .set({
      leaseOwner: deps.owner,
      leaseExpiresAt: sql`now() + ${`${deps.leaseMs} milliseconds`}::interval`,
      attempts: sql`${invoicePushes.attempts} + 1`,
      updatedAt: sql`now()`,
    })
    .where(inArray(invoicePushes.id, due))
    .returning({
      id: invoicePushes.id,
      connectionId: invoicePushes.connectionId,
      payload: invoicePushes.payload,
      attempts: invoicePushes.attempts,
    });
  const result: PushTickResult = { claimed: claimed.length, pushed: 0, retrying: 0, dead: 0, deferred: 0 };
  if (claimed.length === 0) return result;

  const connectionIds = [
    ...new Set(claimed.map((p) => p.connectionId).filter((id): id is string => id !== null)),
  ];
  const connections = connectionIds.length
    ? await db
        .select({
          id: xeroConnections.id,
          organizationId: xeroConnections.organizationId,
          tenantId: xeroConnections.tenantId,
          status: xeroConnections.status,
          accessTokenEnc: xeroConnections.accessTokenEnc,
          accessExpiresAt: xeroConnections.accessExpiresAt,
        })
        .from(xeroConnections)
        .where(inArray(xeroConnections.id, connectionIds))
    : [];
  const byId = new Map(connections.map((c) => [c.id, c]));
  const accessTokens = new Map<string, Promise<string | undefined>>();
  const accessToken = (c: (typeof connections)[number]) => {
    let token = accessTokens.get(c.id);
    if (!token) {
      token =
        c.accessTokenEnc && c.accessExpiresAt && c.accessExpiresAt.getTime() > Date.now() + 5000
          ? deps.box.open(c.accessTokenEnc, tokenContext(c.organizationId, c.tenantId, 'access'))
          : Promise.resolve(undefined);
      accessTokens.set(c.id, token);
    }
    return token;
  };

  // Outcomes are collected and written together in one statement at the end: one round trip per
  // batch instead of one per push. If the tick dies before that write, the leases expire and the
  // pushes are retried under the same Idempotency-Key, so Xero still holds each invoice once.
  const settlements: Settlement[] = [];
  const settle = (id: string, s: Omit<Settlement, 'id'>) => void settlements.push({ id, ...s });
  let poison: unknown;
  const pushClaimed = async (push: (typeof claimed)[number]) => {
    try {
      const connection = push.connectionId ? byId.get(push.connectionId) : undefined;
      if (connection?.status !== 'active') {
        settle(push.id, { status: 'awaiting_connection', attempts: push.attempts - 1 });
        result.deferred += 1;
        return;
      }
      const token = await accessToken(connection);
      if (!token) {
        // The refresh tick renews it; this attempt is not the invoice's fault.
        settle(push.id, { retryInMs: 15_000, attempts: push.attempts - 1 });
        result.deferred += 1;
        return;
      }
      const outcome = await pushOne(deps, connection.tenantId, token, push.id, push.payload as InvoiceInput);
      if (outcome === 'deferred') {
        settle(push.id, { retryInMs: 1000, attempts: push.attempts - 1 });
        result.deferred += 1;
        return;
      }
      const [kind, settlement] = await record(db, deps, push, connection.id, outcome);
      settle(push.id, settlement);
      result[kind] += 1;
    } catch (err) {
      if (poisonReason(err) !== undefined) {
        poison ??= err;
        return;
      }
      // A bug or a corrupt row: keep it from blocking the batch, and leave a trace on the push.
      deps.log.error('push failed unexpectedly', { push: push.id, err });
      settle(push.id, {
        status: 'failed',
        retryInMs: backoffMs(push.attempts, deps.backoff),
        lastError: 'internal error',
      });
    }
  };
  // Bounded fan-out: a large batch must not open hundreds of Xero calls at once and time them out.
  const queue = [...claimed];
  await Promise.all(
    Array.from({ length: Math.min(MAX_IN_FLIGHT, queue.length) }, async () => {
      for (let push = queue.shift(); push; push = queue.shift()) await pushClaimed(push);
    }),
  );
  await settleAll(db, deps.owner, settlements);
  if (poison !== undefined) throw poison;
  return result;
}

const MAX_IN_FLIGHT = 16;

async function pushOne(
  deps: PushTickDeps,
  tenantId: string,
  token: string,
  idempotencyKey: string,
  payload: InvoiceInput,
): Promise<PushOutcome | 'deferred'> {
  // Wait briefly for a slot among the tenant's 5 in flight; beyond that, the next tick takes it.
  for (let waited = 0; ; ) {
    const slot = deps.limiter.tryAcquire(tenantId);
    if ('release' in slot) {
      try {
        return await deps.xero.putInvoice(token, tenantId, idempotencyKey, toXeroInvoice(payload));
      } finally {
        slot.release();
      }
    }
    if (slot.retryInMs > 1000 || waited > 5000) return 'deferred';
    await new Promise((r) => setTimeout(r, slot.retryInMs));
    waited += slot.retryInMs;
  }
}

type Recorded = 'pushed' | 'retrying' | 'dead';

async function record(
  db: Database,
  deps: PushTickDeps,
  push: { id: string; attempts: number },
  connectionId: string,
  outcome: PushOutcome,
): Promise<[Recorded, Omit<Settlement, 'id'>]> {
  switch (outcome.kind) {
    case 'ok':
      return ['pushed', { status: 'pushed', xeroInvoiceId: outcome.invoiceId }];
    case 'invalid':
      return ['dead', { status: 'dead', lastError: `Xero rejected the invoice: ${outcome.message}` }];
    case 'rate_limited':
      // Xero's own pacing, not a failure of this invoice: the attempt is given back.
      return [
        'retrying',
        {
          retryInMs: outcome.retryAfterSeconds * 1000,
          attempts: push.attempts - 1,
          lastError: `rate limited by Xero; retrying after ${outcome.retryAfterSeconds} s`,
        },
      ];
    case 'unauthorized':
      // Expire the access token so the refresh tick renews it before the next attempt.
      await db
        .update(xeroConnections)
        .set({ accessExpiresAt: sql`now()`, updatedAt: sql`now()` })
        .where(eq(xeroConnections.id, connectionId));
      return ['retrying', { retryInMs: 5000, attempts: push.attempts - 1, lastError: 'Xero answered 401' }];
    case 'transient':
      if (push.attempts >= deps.maxAttempts) {
        return [
          'dead',
          { status: 'dead', lastError: `gave up after ${push.attempts} attempts: ${outcome.reason}` },
        ];
      }
      return [
        'retrying',
        { status: 'failed', retryInMs: backoffMs(push.attempts, deps.backoff), lastError: outcome.reason },
      ];
  }
}

/** Exponential back-off with full jitter over the upper half, capped: 1 → base, 2 → 2·base, ... */
export function backoffMs(attempt: number, { baseMs, maxMs }: { baseMs: number; maxMs: number }): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

interface Settlement {
  id: string;
  status?: 'pushed' | 'failed' | 'dead' | 'awaiting_connection';
  retryInMs?: number;
  attempts?: number;
  lastError?: string;
  xeroInvoiceId?: string;
}

// One statement for the whole batch, fenced on the lease: a push whose lease expired and was taken
// by another replica is left to that replica.
async function settleAll(db: Database, owner: string, settlements: Settlement[]): Promise<void> {
  for (let i = 0; i < settlements.length; i += SETTLE_CHUNK) {
    const rows = settlements.slice(i, i + SETTLE_CHUNK).map(
      (s) =>
        sql`(${s.id}::uuid, ${s.status ?? null}::text, ${s.attempts === undefined ? null : Math.max(0, s.attempts)}::int,
             ${s.retryInMs === undefined ? null : Math.round(s.retryInMs)}::bigint, ${s.lastError ?? null}::text,
             ${s.xeroInvoiceId ?? null}::text)`,
    );
    await db.execute(sql`
      UPDATE invoice_pushes AS p SET
        status = coalesce(v.status, p.status),
        attempts = coalesce(v.attempts, p.attempts),
        next_attempt_at = CASE WHEN v.retry_ms IS NULL THEN p.next_attempt_at
                               ELSE now() + v.retry_ms * interval '1 millisecond' END,
        xero_invoice_id = coalesce(v.xero_id, p.xero_invoice_id),
        last_error = CASE WHEN v.xero_id IS NOT NULL THEN NULL ELSE coalesce(v.last_error, p.last_error) END,
        lease_owner = NULL,
        lease_expires_at = NULL,
        updated_at = now()
      FROM (VALUES ${sql.join(rows, sql`, `)}) AS v(id, status, attempts, retry_ms, last_error, xero_id)
      WHERE p.id = v.id AND p.lease_owner = ${owner}`);
  }
}

const SETTLE_CHUNK = 500;
