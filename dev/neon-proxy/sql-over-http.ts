// Neon's SQL-over-HTTP protocol (`POST /sql`), as spoken by `neon()` from @neondatabase/serverless,
// served from a plain PostgreSQL. The wire format mirrors Neon's proxy (proxy/src/serverless/
// sql_over_http.rs): the same request headers and bodies, the same result JSON, and errors as
// HTTP 400 with the Postgres error fields so the driver throws a NeonDbError carrying `.code`.
import pg from 'pg';

export interface SqlOverHttpOptions {
  /** The one network destination: the client's connection string only picks user/password/database. */
  upstreamHost: string;
  upstreamPort: number;
  /** Connections per (user, password, database) pool. Default 10. */
  maxPoolSize?: number;
  /** Default 10 MiB, Neon's default; larger results fail with HTTP 507 as they would on Neon. */
  maxResponseBytes?: number;
}

export interface SqlRequest {
  /** Lower-cased header names, as node's IncomingMessage#headers has them. */
  headers: Readonly<Record<string, string | string[] | undefined>>;
  body: string;
}

export interface SqlResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

export interface SqlOverHttpStats {
  /** `/sql` requests answered, whatever the outcome. */
  requests: number;
  /** Statements that ran successfully (each statement of a batch counts). */
  queries: number;
  /** Requests answered with a non-200 status. */
  errors: number;
}

export const DEFAULT_MAX_BODY_BYTES = 10 * 1024 * 1024;

const HEADER = {
  connectionString: 'neon-connection-string',
  rawTextOutput: 'neon-raw-text-output',
  arrayMode: 'neon-array-mode',
  isolationLevel: 'neon-batch-isolation-level',
  readOnly: 'neon-batch-read-only',
  deferrable: 'neon-batch-deferrable',
} as const;

const ISOLATION_LEVELS: Readonly<Record<string, string>> = {
  ReadUncommitted: 'READ UNCOMMITTED',
  ReadCommitted: 'READ COMMITTED',
  RepeatableRead: 'REPEATABLE READ',
  Serializable: 'SERIALIZABLE',
};

// Every field of a Postgres ErrorResponse that the driver copies onto its NeonDbError.
const ERROR_FIELDS = [
  'detail',
  'hint',
  'position',
  'internalPosition',
  'internalQuery',
  'where',
  'schema',
  'table',
  'column',
  'dataType',
  'constraint',
  'file',
  'line',
  'routine',
] as const;

/** An error answered with `status` and a Neon-shaped JSON body. */
class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

interface Statement {
  query: string;
  params: (string | null)[];
  arrayMode: boolean | undefined;
}

interface Options {
  rawText: boolean;
  arrayMode: boolean;
  isolationLevel: string | undefined;
  readOnly: boolean;
  deferrable: boolean;
}

interface Credentials {
  user: string;
  password: string | undefined;
  database: string;
}

// `queryMode: 'extended'` is in pg but not in @types/pg. The extended protocol is what Neon uses
// too, so several statements in one query string fail here exactly as they fail on Neon.
type RawQuery = pg.QueryArrayConfig & { queryMode: 'extended' };

// No type parsing: every value comes back as the server's text, which is what Neon sends.
const rawTextTypes = {
  getTypeParser: () => (value: string) => value,
} as unknown as pg.CustomTypesConfig;

function header(request: SqlRequest, name: string): string | undefined {
  const value = request.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

function parseCredentials(connectionString: string | undefined): Credentials {
  if (connectionString === undefined || connectionString === '') {
    throw new HttpError(400, 'missing connection string: send it in the Neon-Connection-String header');
  }
  let url: URL;
  try {
    url = new URL(connectionString);
  } catch {
    throw new HttpError(400, 'Neon-Connection-String is not a valid URL');
  }
  if (url.protocol !== 'postgres:' && url.protocol !== 'postgresql:') {
    throw new HttpError(400, 'Neon-Connection-String must be a postgres:// or postgresql:// URL');
  }
  // The host and port are ignored on purpose: the proxy only ever connects to its configured upstream.
  const user = decodeURIComponent(url.username);
  const database = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (user === '' || database === '') {
    throw new HttpError(400, 'Neon-Connection-String must name a user and a database');
  }
  return { user, password: url.password === '' ? undefined : decodeURIComponent(url.password), database };
}

function parseOptions(request: SqlRequest): Options {
  const level = header(request, HEADER.isolationLevel);
  const isolationLevel = level === undefined ? undefined : ISOLATION_LEVELS[level];
  if (level !== undefined && isolationLevel === undefined)
    throw new HttpError(400, 'invalid isolation level');
  // As on Neon, anything but exactly 'true' means false.
  return {
    rawText: header(request, HEADER.rawTextOutput) === 'true',
    arrayMode: header(request, HEADER.arrayMode) === 'true',
    isolationLevel,
    readOnly: header(request, HEADER.readOnly) === 'true',
    deferrable: header(request, HEADER.deferrable) === 'true',
  };
}

// JSON parameters become Postgres text the way Neon converts them (proxy/src/serverless/json.rs).
function paramToText(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'string') return value;
  if (Array.isArray(value)) return arrayToPgText(value);
  return JSON.stringify(value);
}

function arrayToPgText(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) return `{${value.map(arrayToPgText).join(',')}}`;
  // Inside an array literal strings are double-quoted; JSON escaping matches what Postgres accepts.
  if (typeof value === 'object') return JSON.stringify(JSON.stringify(value));
  return JSON.stringify(value);
}

function parseStatement(value: unknown): Statement {
  if (typeof value !== 'object' || value === null) throw new HttpError(400, 'each query must be an object');
  const { query, params, arrayMode } = value as Record<string, unknown>;
  if (typeof query !== 'string') throw new HttpError(400, '`query` must be a string');
  if (params !== undefined && !Array.isArray(params)) throw new HttpError(400, '`params` must be an array');
  if (arrayMode !== undefined && typeof arrayMode !== 'boolean') {
    throw new HttpError(400, '`arrayMode` must be a boolean');
  }
  return { query, params: (params ?? []).map(paramToText), arrayMode };
}

function parsePayload(body: string): { batch: boolean; statements: Statement[] } {
  let payload: unknown;
  try {
    payload = JSON.parse(body);
  } catch (error) {
    throw new HttpError(400, `request body is not valid JSON: ${(error as Error).message}`);
  }
  if (typeof payload === 'object' && payload !== null) {
    const { query, queries } = payload as Record<string, unknown>;
    if (query !== undefined) return { batch: false, statements: [parseStatement(payload)] };
    if (Array.isArray(queries)) return { batch: true, statements: queries.map(parseStatement) };
  }
  throw new HttpError(400, 'request body must be {"query", "params"} or {"queries": [...]}');
}

// --- Result conversion ---------------------------------------------------------------------------

const BOOL = 16;
const INT2 = 21;
const INT4 = 23;
const FLOAT4 = 700;
const FLOAT8 = 701;
const JSON_OID = 114;
const JSONB = 3802;
// Array type → element type, for the built-in arrays whose elements are not plain strings in JSON
// and the common string-valued ones. Only needed without Neon-Raw-Text-Output (which the driver
// always sends); arrays of any other type are passed through as their Postgres text.
const ARRAY_ELEMENT: Readonly<Record<number, number>> = {
  1000: BOOL,
  1005: INT2,
  1007: INT4,
  1021: FLOAT4,
  1022: FLOAT8,
  199: JSON_OID,
  3807: JSONB,
  1009: 25, // text
  1015: 1043, // varchar
  1014: 1042, // bpchar
  1016: 20, // int8
  1231: 1700, // numeric
  2951: 2950, // uuid
  1182: 1082, // date
  1115: 1114, // timestamp
  1185: 1184, // timestamptz
};

function textToJson(text: string, type: number): unknown {
  const element = ARRAY_ELEMENT[type];
  if (element !== undefined) return parsePgArray(text, element);
  switch (type) {
    case BOOL:
      return text === 't';
    case INT2:
    case INT4:
      return Number.parseInt(text, 10);
    case FLOAT4:
    case FLOAT8: {
      const number = Number(text);
      return Number.isFinite(number) ? number : text; // NaN and ±Infinity stay strings, as on Neon
    }
    case JSON_OID:
    case JSONB:
      return JSON.parse(text);
    default:
      return text;
  }
}

/** Parses Postgres array text output (`{1,NULL,"a b"}`, nested, with `[1:2]=` bounds) into JSON. */
function parsePgArray(text: string, element: number): unknown[] {
  let i = 0;
  if (text.startsWith('[')) i = text.indexOf('=') + 1;
  const parseList = (): unknown[] => {
    const items: unknown[] = [];
    i++; // '{'
    if (text[i] === '}') {
      i++;
      return items;
    }
    for (;;) {
      if (text[i] === '{') {
        items.push(parseList());
      } else if (text[i] === '"') {
        let value = '';
        for (i++; i < text.length && text[i] !== '"'; i++) {
          if (text[i] === '\\') i++;
          value += text[i] ?? '';
        }
        i++; // closing quote
        items.push(textToJson(value, element));
      } else {
        let end = i;
        while (end < text.length && text[end] !== ',' && text[end] !== '}') end++;
        const value = text.slice(i, end).trim();
        items.push(value === 'NULL' ? null : textToJson(value, element));
        i = end;
      }
      if (text[i] === ',') {
        i++;
        continue;
      }
      i++; // '}'
      return items;
    }
  };
  return parseList();
}

function resultToJson(result: pg.QueryArrayResult, options: Options, statement: Statement) {
  const arrayMode = statement.arrayMode ?? options.arrayMode;
  const fields = result.fields.map((field) => ({
    name: field.name,
    dataTypeID: field.dataTypeID,
    tableID: field.tableID,
    columnID: field.columnID,
    dataTypeSize: field.dataTypeSize,
    dataTypeModifier: field.dataTypeModifier,
    format: 'text',
  }));
  const rows = result.rows.map((row) => {
    const values = options.rawText
      ? row
      : row.map((value, i) =>
          value === null ? null : textToJson(value as string, fields[i]?.dataTypeID ?? 0),
        );
    return arrayMode ? values : Object.fromEntries(values.map((value, i) => [fields[i]?.name, value]));
  });
  return { fields, command: result.command ?? '', rowCount: result.rowCount, rows, rowAsArray: arrayMode };
}

// --- Errors --------------------------------------------------------------------------------------

function errorBody(error: unknown): Record<string, unknown> {
  const source = (error ?? {}) as Record<string, unknown>;
  const isDbError = error instanceof pg.DatabaseError;
  const body: Record<string, unknown> = {
    message: error instanceof Error ? error.message : String(error),
    code: isDbError ? (source.code ?? '') : '',
    severity: isDbError ? (source.severity ?? '') : '',
  };
  for (const field of ERROR_FIELDS) body[field] = isDbError ? (source[field] ?? null) : null;
  return body;
}

function jsonResponse(status: number, body: unknown, headers: Record<string, string> = {}): SqlResponse {
  return {
    status,
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  };
}

// --- Handler -------------------------------------------------------------------------------------

export class SqlOverHttp {
  private readonly pools = new Map<string, pg.Pool>();
  private readonly counters: SqlOverHttpStats = { requests: 0, queries: 0, errors: 0 };
  private readonly maxPoolSize: number;
  private readonly maxResponseBytes: number;
  private closed = false;

  constructor(private readonly options: SqlOverHttpOptions) {
    this.maxPoolSize = options.maxPoolSize ?? 10;
    this.maxResponseBytes = options.maxResponseBytes ?? DEFAULT_MAX_BODY_BYTES;
  }

  stats(): SqlOverHttpStats {
    return { ...this.counters };
  }

  /** Answers one `POST /sql`. Never throws: every failure becomes a Neon-shaped error response. */
  async handle(request: SqlRequest): Promise<SqlResponse> {
    this.counters.requests++;
    const response = await this.run(request).catch((error: unknown) => {
      if (error instanceof HttpError) return jsonResponse(error.status, errorBody(error));
      // The server's own rejections (bad password, unknown database, failed BEGIN) carry a SQLSTATE.
      return jsonResponse(error instanceof pg.DatabaseError ? 400 : 500, errorBody(error));
    });
    if (response.status !== 200) this.counters.errors++;
    return response;
  }

  async close(): Promise<void> {
    this.closed = true;
    const pools = [...this.pools.values()];
    this.pools.clear();
    await Promise.all(pools.map((pool) => pool.end().catch(() => {})));
  }

  private async run(request: SqlRequest): Promise<SqlResponse> {
    if (this.closed) throw new HttpError(503, 'the proxy is shutting down');
    const credentials = parseCredentials(header(request, HEADER.connectionString));
    const options = parseOptions(request);
    const { batch, statements } = parsePayload(request.body);

    let client: pg.PoolClient;
    try {
      client = await this.pool(credentials).connect();
    } catch (error) {
      // Rejections by the server (bad password, unknown database) are the user's: 400 with the
      // SQLSTATE. An unreachable upstream is a server-side failure: 500, as Neon does.
      throw error instanceof pg.DatabaseError
        ? error
        : new HttpError(500, connectMessage(error, this.options));
    }

    let failure: unknown;
    try {
      const body = batch
        ? { results: await this.runBatch(client, statements, options) }
        : await this.runStatement(client, statements[0] as Statement, options);
      const text = JSON.stringify(body);
      if (Buffer.byteLength(text) > this.maxResponseBytes) {
        throw new HttpError(507, `response is too large (max is ${this.maxResponseBytes} bytes)`);
      }
      return {
        status: 200,
        headers: { 'content-type': 'application/json', ...batchHeaders(batch, options) },
        body: text,
      };
    } catch (error) {
      if (error instanceof HttpError) throw error;
      failure = error;
      // Any failed query is a 400 with the Postgres error fields (as on Neon), even a dropped connection.
      return jsonResponse(400, errorBody(error));
    } finally {
      // Like Neon, only hand an idle, error-free connection back to the pool: anything else
      // (a failed query, a dead socket, a transaction left open by `BEGIN`) is destroyed.
      const reusable = failure === undefined && client.getTransactionStatus() === 'I';
      client.release(reusable ? undefined : failure instanceof Error ? failure : true);
    }
  }

  private async runStatement(client: pg.PoolClient, statement: Statement, options: Options) {
    const config: RawQuery = {
      text: statement.query,
      values: statement.params,
      rowMode: 'array',
      types: rawTextTypes,
      queryMode: 'extended',
    };
    const result = await client.query(config);
    this.counters.queries++;
    return resultToJson(result, options, statement);
  }

  private async runBatch(client: pg.PoolClient, statements: Statement[], options: Options) {
    const modes = [
      options.isolationLevel === undefined ? '' : ` ISOLATION LEVEL ${options.isolationLevel}`,
      options.readOnly ? ' READ ONLY' : '',
      options.deferrable ? ' DEFERRABLE' : '',
    ].filter(Boolean);
    await client.query(`BEGIN${modes.join(',')}`);
    try {
      const results = [];
      for (const statement of statements) results.push(await this.runStatement(client, statement, options));
      await client.query('COMMIT');
      return results;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => {});
      throw error;
    }
  }

  private pool(credentials: Credentials): pg.Pool {
    const key = JSON.stringify([credentials.user, credentials.password ?? null, credentials.database]);
    let pool = this.pools.get(key);
    if (pool === undefined) {
      pool = new pg.Pool({
        host: this.options.upstreamHost,
        port: this.options.upstreamPort,
        user: credentials.user,
        password: credentials.password,
        database: credentials.database,
        application_name: 'neon-local-proxy',
        max: this.maxPoolSize,
        idleTimeoutMillis: 30_000,
        connectionTimeoutMillis: 10_000,
      });
      // An idle client whose server went away (restart, crash) errors here; the pool drops it.
      pool.on('error', () => {});
      // A checked-out client can also emit 'error' (pg-pool removes its own listener meanwhile);
      // the failure reaches the running query, so this only keeps the process alive.
      pool.on('connect', (client) => client.on('error', () => {}));
      this.pools.set(key, pool);
    }
    return pool;
  }
}

function batchHeaders(batch: boolean, options: Options): Record<string, string> {
  if (!batch) return {};
  const headers: Record<string, string> = {};
  if (options.readOnly) headers['Neon-Batch-Read-Only'] = 'true';
  if (options.deferrable) headers['Neon-Batch-Deferrable'] = 'true';
  const level = Object.entries(ISOLATION_LEVELS).find(([, sql]) => sql === options.isolationLevel)?.[0];
  if (level !== undefined) headers['Neon-Batch-Isolation-Level'] = level;
  return headers;
}

function connectMessage(error: unknown, options: SqlOverHttpOptions): string {
  const reason = error instanceof Error ? error.message : String(error);
  return `could not connect to the upstream database at ${options.upstreamHost}:${options.upstreamPort}: ${reason}`;
}
