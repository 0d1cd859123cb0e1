import type { Database } from '@honest-health/platform';
import {
  errorCode,
  forbidNamedStatements,
  NAMED_STATEMENT_LOST,
  statementName,
} from '@honest-health/platform';
import { and, desc, eq, type SQL, sql } from 'drizzle-orm';
import { rowsOf } from '../push/rows.js';
import { invoicePushes, organizations, type PushStatus, xeroConnections } from '../schema.js';

// Every state change is a single statement, so the same code runs on pg, PGlite and Neon over HTTP.

const columns = {
  id: invoicePushes.id,
  status: invoicePushes.status,
  idempotencyKey: invoicePushes.idempotencyKey,
  requestHash: invoicePushes.requestHash,
  payload: invoicePushes.payload,
  attempts: invoicePushes.attempts,
  nextAttemptAt: invoicePushes.nextAttemptAt,
  lastError: invoicePushes.lastError,
  xeroInvoiceId: invoicePushes.xeroInvoiceId,
  tenantId: invoicePushes.tenantId,
  createdAt: invoicePushes.createdAt,
  updatedAt: invoicePushes.updatedAt,
  // Exact (microsecond) creation time for cursors: a JS Date would round it and skip rows.
  cursorAt: sql<string>`${invoicePushes.createdAt}::text`.as('cursor_at'),
};

// What a new row brings back: the rest of its answer is known without asking (attempts 0, no Xero id,
// next attempt, creation and update at its creation time). One text column, a JSON array
// [id, status, last_error, tenant_id, created_ms]: as five columns, node-postgres would parse a
// five-field row description and build five parsers on every insert. The time as epoch milliseconds,
// which the JSON keeps a number.
const createdColumns = {
  created:
    sql<string>`json_build_array(${invoicePushes.id}, ${invoicePushes.status}, ${invoicePushes.lastError},
    ${invoicePushes.tenantId}, (extract(epoch from ${invoicePushes.createdAt}) * 1000)::float8)::text`.as(
      'created',
    ),
};
type CreatedRow = [
  id: string,
  status: PushStatus,
  lastError: string | null,
  tenantId: string | null,
  ms: number,
];
// A list, and an answer to a POST, never read the payload: a page of large invoices would be that
// many MiB through the pool, and a replay answers without it.
const { payload: _listPayload, ...listColumns } = columns;

export type PushRow = {
  id: string;
  status: PushStatus;
  idempotencyKey: string;
  requestHash: string;
  payload: unknown;
  attempts: number;
  nextAttemptAt: Date;
  lastError: string | null;
  xeroInvoiceId: string | null;
  tenantId: string | null;
  createdAt: Date;
  updatedAt: Date;
  cursorAt: string;
};

export type AcceptedRow = Omit<PushRow, 'payload'>;

export interface CreateResult {
  push: AcceptedRow;
  created: boolean;
}

// Built once per pool (a failover's rebuilt pool gets its own) and prepared by name: the statement is
// the hot path of ingress, and re-building its SQL and re-planning it per request cost more than the
// insert itself. The result columns are listed, so a migration adding a column cannot change them.
// Behind a transaction-mode pooler the name would not survive: there it is the unnamed statement
// (built SQL reused, planned per execution); see statements.ts and docs/poolers.md.
const preparedInserts = new WeakMap<Database, ReturnType<typeof prepareInsert>>();

/** What an invoice waiting for its organization's default says (GET /api/invoices/:id, last_error). */
export const NO_DEFAULT_REASON =
  'no Xero tenant chosen: POST /api/connections/{id}/default (see GET /api/connections)';
export const TENANT_GONE_REASON = 'its Xero tenant is not connected: connect it again and choose it';

function prepareInsert(db: Database) {
  const organizationId = sql.placeholder('organizationId');
  const tenant = sql`${sql.placeholder('tenantId')}::text`;
  // Never "the oldest connection": the tenant named, if this organization chose it, else its default.
  // No default in the statement's snapshot: read it again FOR SHARE, which waits for a concurrent
  // POST /api/connections/{id}/default and returns its default, or makes it wait for this insert so
  // that its binding of waiting pushes, which runs next, sees this one. A default already set needs no
  // lock: the invoice goes where the organization's default was when it arrived.
  // Chosen once, in a CTE that FOR SHARE keeps materialized: as an expression repeated in four columns,
  // the planner never settled on a generic plan for the prepared statement and planned every insert.
  const defaultOf = (lock: SQL) => sql`(select ${organizations.defaultConnectionId} from ${organizations}
    where ${organizations.id} = ${organizationId} ${lock})`;
  const target = db.$with('target', { connectionId: sql<string | null>`connection_id` }).as(
    sql`select (case when ${tenant} is null
        then coalesce(${defaultOf(sql``)}, ${defaultOf(sql`for share`)})
        else (select ${xeroConnections.id} from ${xeroConnections}
              where ${xeroConnections.organizationId} = ${organizationId}
                and ${xeroConnections.tenantId} = ${tenant} and ${xeroConnections.chosen}) end) as connection_id`,
  );
  const connection = sql`(select connection_id from ${target})`;
  return (
    db
      .with(target)
      .insert(invoicePushes)
      .values({
        organizationId,
        connectionId: connection,
        tenantId: sql`coalesce(${tenant}, (select ${xeroConnections.tenantId} from ${xeroConnections}
          where ${xeroConnections.id} = ${connection}))`,
        idempotencyKey: sql.placeholder('key'),
        requestHash: sql.placeholder('requestHash'),
        // Sent as the text the request's JSON became, cast by Postgres: not serialized again here.
        payload: sql`${sql.placeholder('payloadText')}::jsonb`,
        payloadBytes: sql.placeholder('payloadBytes'),
        status: sql`case when ${connection} is null then 'awaiting_connection' else 'queued' end`,
        lastError: sql`case when ${connection} is not null then null
          when ${tenant} is null then ${NO_DEFAULT_REASON}::text else ${TENANT_GONE_REASON}::text end`,
      })
      .onConflictDoNothing({ target: [invoicePushes.organizationId, invoicePushes.idempotencyKey] })
      // The payload is not returned: the caller holds it, and parsing it back costs.
      .returning(createdColumns)
      .prepare(statementName(db, 'create_invoice_push'))
  );
}

/** Whether `tenantId` names a connection this organization chose (what ingress may send to). */
export async function isChosenTenant(
  db: Database,
  organizationId: string,
  tenantId: string,
): Promise<boolean> {
  const [row] = await db
    .select({ id: xeroConnections.id })
    .from(xeroConnections)
    .where(
      and(
        eq(xeroConnections.organizationId, organizationId),
        eq(xeroConnections.tenantId, tenantId),
        eq(xeroConnections.chosen, true),
      ),
    );
  return row !== undefined;
}

/**
 * Writes the push durably before anything is sent to Xero, in one round trip: the connection is
 * chosen inside the INSERT (the chosen tenant named, or the organization's default; neither: the push
 * waits, awaiting_connection, with the reason in last_error). A repeated Idempotency-Key returns the
 * existing row (created: false); the caller compares request hashes to tell a replay from a conflict.
 * `tenantId` is checked by the caller first (isChosenTenant) and is not part of the stored payload,
 * which comes as its JSON text (the invoice without tenantId).
 */
export async function createPush(
  db: Database,
  organizationId: string,
  key: string,
  input: { tenantId: string | undefined; payloadText: string; payloadBytes?: number },
  requestHash: string,
): Promise<CreateResult> {
  const values = {
    organizationId,
    tenantId: input.tenantId ?? null,
    key,
    requestHash,
    payloadText: input.payloadText,
    payloadBytes: input.payloadBytes ?? null,
  };
  let inserted: Awaited<ReturnType<ReturnType<typeof prepareInsert>['execute']>>[number] | undefined;
  try {
    [inserted] = await preparedInsert(db).execute(values);
  } catch (err) {
    // A named statement lost to a pooler that detection missed: the server refused it at Parse or
    // Bind, before running anything, so running it again unnamed cannot insert twice.
    if (!NAMED_STATEMENT_LOST.has(errorCode(err) ?? '')) throw err;
    forbidNamedStatements(db);
    preparedInserts.delete(db);
    [inserted] = await preparedInsert(db).execute(values);
  }
  if (inserted) {
    const [id, status, lastError, tenantId, ms] = JSON.parse(inserted.created) as CreatedRow;
    const at = new Date(ms);
    const push: AcceptedRow = {
      id,
      status,
      idempotencyKey: key,
      requestHash,
      attempts: 0,
      nextAttemptAt: at,
      lastError,
      xeroInvoiceId: null,
      tenantId,
      createdAt: at,
      updatedAt: at,
      cursorAt: '',
    };
    return { push, created: true };
  }
  const existing = await findByKey(db, organizationId, key);
  // The conflicting row cannot vanish: pushes are never deleted while their organization exists.
  if (!existing) throw new Error('idempotency conflict without an existing row');
  return { push: existing, created: false };
}

/** The push an Idempotency-Key already made, if any (a replay is answered before tenantId is checked). */
export const findPushByKey = (db: Database, organizationId: string, key: string) =>
  findByKey(db, organizationId, key);

function preparedInsert(db: Database) {
  let insert = preparedInserts.get(db);
  if (!insert) {
    insert = prepareInsert(db);
    preparedInserts.set(db, insert);
  }
  return insert;
}

async function findByKey(
  db: Database,
  organizationId: string,
  key: string,
): Promise<AcceptedRow | undefined> {
  const [row] = await db
    .select(listColumns)
    .from(invoicePushes)
    .where(and(eq(invoicePushes.organizationId, organizationId), eq(invoicePushes.idempotencyKey, key)));
  return row as AcceptedRow | undefined;
}

/** Scoped to the organization: another organization's id reads as absent (404, not 403). */
export async function findPush(
  db: Database,
  organizationId: string,
  id: string,
): Promise<PushRow | undefined> {
  const [row] = await db
    .select(columns)
    .from(invoicePushes)
    .where(and(eq(invoicePushes.organizationId, organizationId), eq(invoicePushes.id, id)));
  return row as PushRow | undefined;
}

export interface ListOptions {
  status?: PushStatus;
  after?: { at: string; id: string };
  limit: number;
}

/**
 * Newest first, keyset-paginated on (created_at, id) so pages stay stable while rows arrive. Without
 * the payload: list items do not show it.
 */
export async function listPushes(
  db: Database,
  organizationId: string,
  options: ListOptions,
): Promise<Omit<PushRow, 'payload'>[]> {
  const { status, after, limit } = options;
  const rows = await db
    .select(listColumns)
    .from(invoicePushes)
    .where(
      and(
        eq(invoicePushes.organizationId, organizationId),
        status ? eq(invoicePushes.status, status) : undefined,
        after
          ? sql`(${invoicePushes.createdAt}, ${invoicePushes.id}) < (${after.at}::timestamptz, ${after.id}::uuid)`
          : undefined,
      ),
    )
    .orderBy(desc(invoicePushes.createdAt), desc(invoicePushes.id))
    .limit(limit);
  return rows as Omit<PushRow, 'payload'>[];
}

/**
 * Pushes not yet finished (what ORG_MAX_PENDING_INVOICES bounds), counted up to `cap` at most, and the
 * bytes of their invoices (ORG_MAX_PENDING_BYTES): payload_bytes, or for a row the previous release
 * wrote, the payload's stored size (pg_column_size reads the TOAST pointer, not the value).
 */
export async function countPending(
  db: Database,
  organizationId: string,
  cap: number,
): Promise<{ pending: number; bytes: number }> {
  const [row] = rowsOf<{ n: number | string; bytes: number | string }>(
    await db.execute(sql`
      SELECT count(*)::int AS n, coalesce(sum(b), 0)::bigint AS bytes FROM (
        SELECT coalesce(payload_bytes, pg_column_size(payload)) AS b FROM invoice_pushes
        WHERE organization_id = ${organizationId} AND status IN ('queued', 'failed', 'awaiting_connection')
        LIMIT ${cap}) pending`),
  );
  return { pending: Number(row?.n ?? 0), bytes: Number(row?.bytes ?? 0) };
}
