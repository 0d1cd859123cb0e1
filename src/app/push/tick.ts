import type { Database, Logger } from '@honest-health/platform';
import { poisonReason } from '@honest-health/platform';
import type { SecretBox } from '@honest-health/platform/crypto';
import { AccessTokenCache, accessTokens } from '../connections/grants.js';
import { type StoredInvoice, toXeroInvoice } from '../invoices/xero-payload.js';
import { idempotencyKeyOf, type XeroClient } from '../xero/client.js';
import type { XeroBudget } from './budget.js';
import { type ClaimedPush, claimPushes } from './claim.js';
import { type CallOutcome, dispatchPushes, type ReadyPush } from './dispatch.js';
import { type Settlement, settlePushes } from './settle.js';
import {
  type AppSignals,
  expireAccessTokens,
  markForbidden,
  recordLimitSignals,
  type TenantSignals,
} from './signals.js';

export interface PushTickDeps {
  xero: XeroClient;
  box: SecretBox;
  /** Xero's limits, counted in Postgres across every replica (budget.ts). */
  budget: XeroBudget;
  /** Decrypted access tokens kept from tick to tick; without it each tick decrypts afresh. */
  tokens?: AccessTokenCache;
  /** This run's lease owner (TickRun.owner): no other run shares it, and no later run takes its leases back. */
  owner: string;
  maxAttempts: number;
  batchSize: number;
  /** The most payload bytes one claim returns (DEFAULT_CLAIM_PAYLOAD_BYTES when unset). */
  maxPayloadBytes?: number;
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

/** A claimed push as the claim found it, and whether the claim recorded its send (ClaimedPush.marked). */
interface Unsent {
  id: string;
  attempts: number;
  marked: boolean;
  /** As the claim found it: an earlier attempt under this key may have created the invoice. */
  inDoubt: boolean;
  /** How long ago this key was first sent (database clock); null: never. */
  keyAgeMs: number | null;
}

interface Ready extends ReadyPush, Unsent {
  connectionId: string;
  grantId: string;
  marker: string;
}

const unsentOf = (push: ClaimedPush): Unsent => ({
  id: push.id,
  attempts: push.attempts,
  marked: push.marked === true,
  inDoubt: push.xero_in_doubt,
  keyAgeMs: push.xero_key_age_ms === null ? null : Number(push.xero_key_age_ms),
});

/**
 * Xero keeps an Idempotency-Key "for 6 minutes from the time of the first call, after which they
 * expire", and then "will instead be processed as a new key" (developer.xero.com, "Idempotent
 * requests"). A push in doubt is resent under its key only while the key is younger than this; after,
 * it is looked up by its marker first. The minute left over covers the send's own time in flight.
 */
export const KEY_RESEND_WITHIN_MS = 5 * 60_000;

/** Whether this claim looks the invoice up in Xero instead of sending it. */
export function looksUp(
  push: Pick<ClaimedPush, 'xero_in_doubt' | 'xero_key_age_ms' | 'xero_key_generation' | 'status'>,
): boolean {
  const age = push.xero_key_age_ms === null ? null : Number(push.xero_key_age_ms);
  if (push.xero_in_doubt && age !== null && age >= KEY_RESEND_WITHIN_MS) return true;
  // Failed under its first key with no send recorded: the previous release's attempt (it records
  // none; its rows from before the migration were marked there), so when, and whether it created
  // the invoice, are unknown.
  return Number(push.xero_key_generation) === 0 && age === null && push.status === 'failed';
}

// Waits Xero's documents leave to us (dev/xero-sandbox/README.md lists them): a 429 without
// Retry-After, which Xero sends only for the minute and day limits.
/** `concurrent`: one of the tenant's 5 calls in flight ends soon. */
const CONCURRENT_RETRY_MS = 1000;
/** `day` without Retry-After (Xero always sends one): an hour, then a probe learns the real reset. */
const DAY_PARK_FALLBACK_MS = 3_600_000;
// `appminute` (the app's rolling minute), or no problem named: one minute (the budget's minute, so a
// test's shortened minute shortens it too).

/**
 * Claims due pushes with one statement that writes a lease, records the sends about to happen and looks
 * up their connections, makes one Xero call per push (a send under its current Idempotency-Key, or a
 * lookup by its marker: looksUp), and records every outcome of the batch with one statement fenced on
 * the lease. Replicas never push the same invoice at once, and the same statements run over every
 * driver, Neon's HTTP one included. Three database round trips per batch in the steady state (claim,
 * Xero's rate-limit signals when it sent any, settle), plus one to read tokens not yet decrypted,
 * one to expire tokens Xero answered 401 for and one to mark connections it answered 403 for; per push,
 * only synchronous work besides the Xero call.
 */
export async function pushDueInvoices(db: Database, deps: PushTickDeps): Promise<PushTickResult> {
  // Before the claim: the budget counts each call from a moment after this one (budget.ts).
  const startBy = Date.now() + deps.budget.sendWithinMs;
  const { pushes: claimed, grants } = await claimPushes(db, {
    owner: deps.owner,
    leaseMs: deps.leaseMs,
    batchSize: deps.batchSize,
    budget: deps.budget,
    maxPayloadBytes: deps.maxPayloadBytes,
    sends: { markerPrefix: deps.xero.marker(''), resendWithinMs: KEY_RESEND_WITHIN_MS },
  });
  const result: PushTickResult = { claimed: claimed.length, pushed: 0, retrying: 0, dead: 0, deferred: 0 };
  if (claimed.length === 0 && grants.length === 0) return result;
  // Calls made per connection: the settle gives back the counted calls that were not.
  const used = new Map<string, number>();

  // Outcomes are collected and written together at the end. If the tick dies before that write, the
  // leases expire and the pushes are retried as the claim left them: in doubt, under the same key
  // inside Xero's window, looked up after it.
  const settlements: Settlement[] = [];
  // Not sent after all: what the claim recorded for the send is taken back.
  const unsent = (push: Unsent): Pick<Settlement, 'inDoubt' | 'key'> =>
    push.marked
      ? { inDoubt: push.inDoubt, ...(push.keyAgeMs === null ? { key: 'unsent' as const } : {}) }
      : {};
  // Not this invoice's fault: the attempt is given back.
  const defer = (push: Unsent, retryInMs: number) => {
    settlements.push({ id: push.id, retryInMs, attempts: push.attempts - 1, ...unsent(push) });
    result.deferred += 1;
  };
  // A bug or a corrupt row: keep it from blocking the batch, and leave a trace on the push. `sent`: the
  // call was made, so it may have reached Xero and the claim's record of the send stays.
  const internalError = (push: Unsent, err: unknown, sent: boolean) => {
    deps.log.error('push failed unexpectedly', { push: push.id, err });
    settlements.push({
      id: push.id,
      status: 'failed',
      retryInMs: backoffMs(push.attempts, deps.backoff),
      lastError: 'internal error',
      ...(sent ? {} : unsent(push)),
    });
  };

  const sendable: ClaimedPush[] = [];
  const versions = new Map<string, number>();
  for (const push of claimed) {
    if (!push.active || push.connection_id === null || push.grant_id === null) {
      // Saving a connection queues the organization's waiting pushes again.
      settlements.push({ id: push.id, status: 'awaiting_connection', attempts: push.attempts - 1 });
      result.deferred += 1;
    } else if (!push.token_fresh) {
      defer(unsentOf(push), 15_000); // still due, so the next refresh run renews its grant first (refresh-tokens.ts)
    } else {
      sendable.push(push);
      versions.set(push.grant_id, push.token_version ?? 0);
    }
  }
  const cached = { hits: 0, misses: 0 };
  const tokens = versions.size
    ? await accessTokens(db, deps.box, deps.tokens ?? new AccessTokenCache(), versions, cached)
    : new Map<string, string | Error>();
  const prepared: Ready[] = [];
  const unopened = new Set<string>();
  for (const push of sendable) {
    const connectionId = push.connection_id as string;
    const grantId = push.grant_id as string;
    const token = tokens.get(grantId);
    if (token === undefined) defer(unsentOf(push), 15_000);
    else if (token instanceof Error) {
      // The grant's fault, not the invoice's (a key not configured, a corrupt row): the push keeps its
      // attempts and waits a minute. The token is expired below, so the refresh tick re-seals a fresh
      // pair at once, or records on the grant why it cannot.
      if (!unopened.has(grantId))
        deps.log.error('xero access token does not open; its pushes wait', {
          grant: grantId,
          reason: token.message,
        });
      unopened.add(grantId);
      defer(unsentOf(push), 60_000);
    } else {
      try {
        // The marker as first sent: the same request under the same key, whatever the config became.
        const marker = push.xero_marker ?? deps.xero.marker(push.id);
        const lookup = looksUp(push);
        prepared.push({
          ...unsentOf(push),
          tenantId: push.tenant_id as string,
          token,
          key: idempotencyKeyOf(push.id, Number(push.xero_key_generation)),
          invoice: lookup ? null : toXeroInvoice(push.payload as StoredInvoice, marker),
          lookup: lookup ? marker : null,
          connectionId,
          grantId,
          marker,
        });
      } catch (err) {
        internalError(unsentOf(push), err, false);
      }
    }
  }
  // A send goes out only if its row already says the key went out and may have created the invoice
  // (the claim wrote that). The claim records every send the tick makes, so this defers nothing.
  const ready: Ready[] = [];
  for (const push of prepared) {
    if (push.lookup !== null || push.marked) ready.push(push);
    else defer(push, 0);
  }

  let poison: unknown;
  const unauthorized = new Set<string>();
  const forbidden = new Map<string, string>();
  const signals = new Map<string, TenantSignals>();
  let app: AppSignals | null = null;
  await dispatchPushes(
    ready,
    deps.xero,
    { startBy },
    {
      done(push, outcome) {
        used.set(push.connectionId, (used.get(push.connectionId) ?? 0) + 1);
        const [kind, settlement] = record(deps, push, outcome);
        if (outcome.kind === 'unauthorized') unauthorized.add(push.grantId);
        if (outcome.kind === 'forbidden') forbidden.set(push.connectionId, forbiddenReason(outcome.detail));
        const signal = signalsOf(push.connectionId, outcome, deps.budget.minuteMs);
        if (signal) {
          const seen = signals.get(push.connectionId);
          signals.set(push.connectionId, {
            ...signal,
            parkForMs: Math.max(seen?.parkForMs ?? 0, signal.parkForMs ?? 0) || null,
          });
        }
        const appSignal = appSignalsOf(outcome, deps.budget.minuteMs);
        if (appSignal) {
          app = {
            appMinRemaining: appSignal.appMinRemaining ?? app?.appMinRemaining ?? null,
            pausedForMs: Math.max(app?.pausedForMs ?? 0, appSignal.pausedForMs ?? 0) || null,
          };
        }
        settlements.push(settlement);
        result[kind] += 1;
      },
      failed(push, err) {
        used.set(push.connectionId, (used.get(push.connectionId) ?? 0) + 1); // it may have reached Xero
        // The client classifies every answer, so a throw is a bug. Should it ever be a poison error,
        // the push is not settled: its lease expires and another tick takes it.
        if (poisonReason(err) !== undefined) poison ??= err;
        else internalError(push, err, true);
      },
      deferred: (push, retryInMs) => defer(push, retryInMs),
    },
  );
  const sideEffects: [string, () => Promise<void>][] = [
    // The pushes still settle (retried in 5 s); the next 401 expires the token again.
    ['expiring access tokens after a 401', () => expireAccessTokens(db, [...unauthorized, ...unopened])],
    ['marking connections Xero answered 403 for', () => markForbidden(db, forbidden)],
    [
      "recording Xero's rate-limit signals",
      () => recordLimitSignals(db, deps.budget, [...signals.values()], app),
    ],
  ];
  for (const [what, run] of sideEffects) {
    try {
      await run();
    } catch (err) {
      if (poisonReason(err) !== undefined) poison ??= err;
      else deps.log.error(`${what} failed`, { err });
    }
  }
  const tenants = new Map(claimed.map((push) => [push.id, push.tenant_id]));
  for (const settlement of settlements) settlement.tenantId ??= tenants.get(settlement.id) ?? null;
  await settlePushes(db, deps.owner, settlements, grants, used);
  if (poison !== undefined) throw poison;
  // One line per run that claimed something (an empty run returned above and logs nothing).
  deps.log.info('push tick done', {
    ...result,
    token_cache_hits: cached.hits,
    token_cache_misses: cached.misses,
  });
  return result;
}

type Recorded = 'pushed' | 'retrying' | 'dead';

function record(deps: PushTickDeps, push: Ready, outcome: CallOutcome): [Recorded, Settlement] {
  const [kind, settlement] = recordCall(deps, push, outcome);
  // Only an answer about the invoice settles the doubt; a 429, 401 or 403 comes before Xero looks at
  // the key (its guide: idempotency is checked after rate limits), so the doubt stays as it was.
  const inDoubt =
    outcome.kind === 'ok' || outcome.kind === 'invalid'
      ? false
      : outcome.kind === 'transient'
        ? push.lookup === null || push.inDoubt
        : push.inDoubt;
  return [kind, { inDoubt, ...settlement }];
}

function recordCall(deps: PushTickDeps, push: Ready, outcome: CallOutcome): [Recorded, Settlement] {
  const { id } = push;
  switch (outcome.kind) {
    case 'ok':
      return ['pushed', { id, status: 'pushed', xeroInvoiceId: outcome.invoiceId }];
    case 'absent':
      // The earlier sends created nothing, and their key has expired or soon will: the next claim
      // sends under a new key, soon. The lookup spent a call, not one of the invoice's attempts.
      return [
        'retrying',
        {
          id,
          key: 'new',
          retryInMs: 0,
          attempts: push.attempts - 1,
          lastError: 'not found in Xero by its marker: sending again under a new Idempotency-Key',
        },
      ];
    case 'invalid':
      return ['dead', { id, status: 'dead', lastError: `Xero rejected the invoice: ${outcome.message}` }];
    case 'rate_limited': {
      // Xero's own pacing, not a failure of this invoice: the attempt is given back.
      const waitMs = rateLimitWaitMs(outcome, deps.budget.minuteMs);
      return [
        'retrying',
        {
          id,
          retryInMs: waitMs,
          attempts: push.attempts - 1,
          lastError: `rate limited by Xero (${outcome.problem ?? 'unspecified'}); retrying after ${Math.ceil(waitMs / 1000)} s`,
        },
      ];
    }
    case 'unauthorized':
      // The caller expires the access token so the refresh tick renews it before the next attempt.
      return [
        'retrying',
        { id, retryInMs: 5000, attempts: push.attempts - 1, lastError: 'Xero answered 401' },
      ];
    case 'forbidden':
      // Not transient (the tenant left in Xero, or a scope is missing): the caller marks the connection,
      // and the push waits for a reconnect without spending an attempt.
      return [
        'retrying',
        {
          id,
          status: 'awaiting_connection',
          attempts: push.attempts - 1,
          lastError: forbiddenReason(outcome.detail),
        },
      ];
    case 'transient': {
      const reason = push.lookup === null ? outcome.reason : `looking the invoice up: ${outcome.reason}`;
      if (push.attempts >= deps.maxAttempts) {
        // In doubt, the invoice may be in Xero: say where to look.
        return [
          'dead',
          {
            id,
            status: 'dead',
            lastError: `gave up after ${push.attempts} attempts: ${reason}; the invoice may exist in Xero with Url ${push.marker}`,
          },
        ];
      }
      let retryInMs = backoffMs(push.attempts, deps.backoff);
      // Xero caches its internal error under the key ("the error will be cached and returned when the
      // request is re-run"): resending under it inside the window only replays it. So the next claim
      // comes once the key is old enough to be looked up instead (looksUp), then a new key if absent.
      if (push.lookup === null && outcome.cached)
        retryInMs = Math.max(retryInMs, KEY_RESEND_WITHIN_MS - (push.keyAgeMs ?? 0));
      return ['retrying', { id, status: 'failed', retryInMs, lastError: reason }];
    }
  }
}

function forbiddenReason(detail: string): string {
  return `Xero answered 403 ${detail}: the tenant was disconnected in Xero or a scope is missing; reconnect`;
}

/** How long a 429 holds this push back: Retry-After where Xero sends it (minute, day), else our choice. */
function rateLimitWaitMs(outcome: Extract<CallOutcome, { kind: 'rate_limited' }>, minuteMs: number): number {
  const after = outcome.retryAfterSeconds === null ? null : outcome.retryAfterSeconds * 1000;
  switch (outcome.problem) {
    case 'day':
      return after ?? DAY_PARK_FALLBACK_MS;
    case 'appminute':
      return after ?? minuteMs;
    case 'concurrent':
      return after ?? CONCURRENT_RETRY_MS;
    default:
      return after ?? minuteMs;
  }
}

/** What this answer tells the next claim about the tenant, if anything. */
function signalsOf(connectionId: string, outcome: CallOutcome, minuteMs: number): TenantSignals | undefined {
  const parkForMs =
    outcome.kind === 'rate_limited' && outcome.problem === 'day' ? rateLimitWaitMs(outcome, minuteMs) : null;
  if (!outcome.limits && parkForMs === null) return undefined;
  return {
    connectionId,
    minRemaining: outcome.limits?.minRemaining ?? null,
    dayRemaining: outcome.limits?.dayRemaining ?? null,
    parkForMs,
  };
}

/** What this answer tells every tenant's next claim, if anything. */
function appSignalsOf(outcome: CallOutcome, minuteMs: number): AppSignals | undefined {
  const pausedForMs =
    outcome.kind === 'rate_limited' && outcome.problem === 'appminute'
      ? rateLimitWaitMs(outcome, minuteMs)
      : null;
  const appMinRemaining = outcome.limits?.appMinRemaining ?? null;
  if (appMinRemaining === null && pausedForMs === null) return undefined;
  return { appMinRemaining, pausedForMs };
}

/** Exponential back-off with full jitter over the upper half, capped: 1 → base, 2 → 2·base, ... */
export function backoffMs(attempt: number, { baseMs, maxMs }: { baseMs: number; maxMs: number }): number {
  const ceiling = Math.min(maxMs, baseMs * 2 ** Math.max(0, attempt - 1));
  return Math.round(ceiling / 2 + Math.random() * (ceiling / 2));
}
