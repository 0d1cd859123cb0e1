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
        inArray(invoicePushes.status, ['queued', 'failed']),
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

  // Each push settles on its own: one failing write must not stop the rest of the batch. A poison
  // error is re-thrown at the end so runTick can dispose the pool and run the tick again.
  let poison: unknown;
  await Promise.all(
    claimed.map(async (push) => {
      try {
        const connection = push.connectionId ? byId.get(push.connectionId) : undefined;
        if (connection?.status !== 'active') {
          await settle(db, deps, push.id, { status: 'awaiting_connection', attempts: push.attempts - 1 });
          result.deferred += 1;
          return;
        }
        const token = await accessToken(connection);
        if (!token) {
          // The refresh tick renews it; this attempt is not the invoice's fault.
          await settle(db, deps, push.id, { retryInMs: 15_000, attempts: push.attempts - 1 });
          result.deferred += 1;
          return;
        }
        const outcome = await pushOne(
          deps,
          connection.tenantId,
          token,
          push.id,
          push.payload as InvoiceInput,
        );
        if (outcome === 'deferred') {
          await settle(db, deps, push.id, { retryInMs: 1000, attempts: push.attempts - 1 });
          result.deferred += 1;
          return;
        }
        const kind = await record(db, deps, push, connection.id, outcome);
        result[kind] += 1;
      } catch (err) {
        if (poisonReason(err) !== undefined) {
          poison ??= err;
          return;
        }
        // A bug or a corrupt row: keep it from blocking the batch, and leave a trace on the push.
        deps.log.error('push failed unexpectedly', { push: push.id, err });
        await settle(db, deps, push.id, {
          status: 'failed',
          retryInMs: backoffMs(push.attempts, deps.backoff),
          lastError: 'internal error',
        }).catch((e: unknown) => {
          poison ??= e;
        });
      }
    }),
  );
  if (poison !== undefined) throw poison;
  return result;
}

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
): Promise<Recorded> {
  switch (outcome.kind) {
    case 'ok':
      await settle(db, deps, push.id, { status: 'pushed', xeroInvoiceId: outcome.invoiceId });
      return 'pushed';
    case 'invalid':
      await settle(db, deps, push.id, {
        status: 'dead',
        lastError: `Xero rejected the invoice: ${outcome.message}`,
      });
      return 'dead';
    case 'rate_limited':
      // Xero's own pacing, not a failure of this invoice: the attempt is given back.
      await settle(db, deps, push.id, {
        retryInMs: outcome.retryAfterSeconds * 1000,
        attempts: push.attempts - 1,
        lastError: `rate limited by Xero; retrying after ${outcome.retryAfterSeconds} s`,
      });
      return 'retrying';
    case 'unauthorized':
      // Expire the access token so the refresh tick renews it before the next attempt.
      await db
        .update(xeroConnections)
        .set({ accessExpiresAt: sql`now()`, updatedAt: sql`now()` })
        .where(eq(xeroConnections.id, connectionId));
      await settle(db, deps, push.id, {
        retryInMs: 5000,
        attempts: push.attempts - 1,
        lastError: 'Xero answered 401',
      });
      return 'retrying';
    case 'transient': {
      if (push.attempts >= deps.maxAttempts) {
        await settle(db, deps, push.id, {
          status: 'dead',
          lastError: `gave up after ${push.attempts} attempts: ${outcome.reason}`,
        });
        return 'dead';
      }
      await settle(db, deps, push.id, {
        status: 'failed',
        retryInMs: backoffMs(push.attempts, deps.backoff),
        lastError: outcome.reason,
      });
      return 'retrying';
    }
  }
}

/** Exponential back-off with full jitter over the upper half, capped: 1 → base, 2 → 2·base, ... */
export function backoffMs(attempt: number, { baseMs, maxMs }: { baseMs: number; maxMs: number }): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}

interface Settlement {
  status?: 'pushed' | 'failed' | 'dead' | 'awaiting_connection';
  retryInMs?: number;
  attempts?: number;
  lastError?: string;
  xeroInvoiceId?: string;
}

// Fenced on the lease: if it expired and another replica took the push, this write does nothing.
async function settle(db: Database, deps: PushTickDeps, id: string, s: Settlement): Promise<void> {
  await db
    .update(invoicePushes)
    .set({
      ...(s.status ? { status: s.status } : {}),
      ...(s.attempts !== undefined ? { attempts: Math.max(0, s.attempts) } : {}),
      ...(s.retryInMs !== undefined
        ? { nextAttemptAt: sql`now() + ${`${Math.round(s.retryInMs)} milliseconds`}::interval` }
        : {}),
      ...(s.xeroInvoiceId ? { xeroInvoiceId: s.xeroInvoiceId, lastError: null } : {}),
      ...(s.lastError !== undefined ? { lastError: s.lastError } : {}),
      leaseOwner: null,
      leaseExpiresAt: null,
      updatedAt: sql`now()`,
    })
    .where(and(eq(invoicePushes.id, id), eq(invoicePushes.leaseOwner, deps.owner)));
}
