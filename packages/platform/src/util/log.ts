import { causeChain } from './error-chain.js';
import { logContext } from './log-context.js';

// Structured JSON logs: one object per line, written synchronously enough that the last line before
// an exit (a hard boot failure) is never lost. Inside a request or a tick every line also carries the
// request id, or the tick's name and run id (log-context.ts).

/** The logger's levels, least severe first. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

const rank: Record<LogLevel, number> = { debug: 10, info: 20, warn: 30, error: 40 };

/** The fields of a log line, beside its time, level and message. */
export type LogFields = Record<string, unknown>;

/** Structured JSON logging: one line per call, with the given fields and the request's or tick's context. */
export interface Logger {
  debug(msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
  child(fields: LogFields): Logger;
}

/** Where a logger's lines go: stdout by default. */
export type LogSink = (line: string) => void;

/**
 * Why an error poisons its pool, or undefined when it does not. Injected where a logger is built
 * (db/poison.ts poisonReason), so this leaf never imports the database layer.
 */
export type PoisonClassifier = (err: unknown) => string | undefined;

const consoleSink: LogSink = (line) => console.log(line);

/**
 * JSON lines on stdout (or `sink`), one per event, with `base` on every line; errors are summarised
 * (code, SQLSTATE, a poison reason from `classify`), never dumped with their parameters.
 *
 * @example
 * ```ts
 * const log = createLogger('info', { service: 'shop' });
 * log.warn('cart expired twice', { cart: id });
 * ```
 */
export function createLogger(
  level: LogLevel = 'info',
  base: LogFields = {},
  sink: LogSink = consoleSink,
  classify?: PoisonClassifier,
): Logger {
  const min = rank[level];
  const replacer = (key: string, value: unknown) => errorReplacer(key, value, classify);
  const write = (lvl: LogLevel, msg: string, fields?: LogFields): void => {
    if (rank[lvl] < min) return;
    sink(
      JSON.stringify(
        { time: new Date().toISOString(), level: lvl, msg, ...base, ...logContext(), ...fields },
        replacer,
      ),
    );
  };
  return {
    debug: (msg, fields) => write('debug', msg, fields),
    info: (msg, fields) => write('info', msg, fields),
    warn: (msg, fields) => write('warn', msg, fields),
    error: (msg, fields) => write('error', msg, fields),
    child: (fields) => createLogger(level, { ...base, ...fields }, sink, classify),
  };
}

// Errors serialise to their name, message and SQLSTATE only: driver errors carry connection
// parameters and query text that must not reach logs. Anything under `err` is treated as an error
// whatever its type: drivers also reject with events and plain objects that hold a client.
function errorReplacer(key: string, value: unknown, classify?: PoisonClassifier): unknown {
  if (value instanceof Error || (key === 'err' && value !== undefined)) return describeError(value, classify);
  return value;
}

/** An error as a log line shows it: name, message, code, and its poison reason when it has one. */
export interface ErrorSummary {
  name: string;
  message: string;
  code?: string;
  /** Outermost error only: the SQLSTATE found anywhere along the cause chain. */
  sqlstate?: string;
  /** Outermost error only, with a classifier: whether the error poisons its pool, and why. */
  poisoned?: boolean;
  poison_reason?: string;
  cause?: ErrorSummary;
}

// SQLSTATE classes are two digits, or HV, P0, XX, F0; errno codes (EPIPE) are not SQLSTATEs.
const SQLSTATE = /^(?:[0-9][0-9A-Z]|HV|P0|XX|F0)[0-9A-Z]{3}$/;

/** The first SQLSTATE along the cause chain (Drizzle puts the driver's error on `cause`). */
export function sqlstateOf(err: unknown): string | undefined {
  for (const e of causeChain(err)) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && SQLSTATE.test(code)) return code;
  }
  return undefined;
}

// The outermost error and up to four causes, each summarised, linked as the chain links them.
const SUMMARY_DEPTH = 5;

/** The error's summary; `poisoned` and `poison_reason` only when a classifier is given. */
export function describeError(err: unknown, classify?: PoisonClassifier): ErrorSummary {
  const chain = [...causeChain(err, { maxDepth: SUMMARY_DEPTH })].map(summarise);
  for (let i = chain.length - 1; i > 0; i--) (chain[i - 1] as ErrorSummary).cause = chain[i];
  const summary = chain[0] ?? summarise(err);
  const sqlstate = sqlstateOf(err);
  if (sqlstate !== undefined) summary.sqlstate = sqlstate;
  if (classify === undefined) return summary;
  const poison = classify(err);
  summary.poisoned = poison !== undefined;
  if (poison !== undefined) summary.poison_reason = poison;
  return summary;
}

function summarise(err: unknown): ErrorSummary {
  if (!(err instanceof Error)) {
    // Never String() an object: that is how a client with its connection parameters gets printed.
    const message = (err as { message?: unknown } | null)?.message;
    const name = (err as { constructor?: { name?: string } } | null)?.constructor?.name ?? typeof err;
    return {
      name,
      message:
        typeof message === 'string' ? redactParams(message) : typeof err === 'object' ? '' : String(err),
    };
  }
  const summary: ErrorSummary = { name: err.name, message: redactParams(err.message) };
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') summary.code = code;
  return summary;
}

/**
 * DrizzleQueryError puts bound parameters (hashes, ciphertexts, tenant ids) into its message.
 */
export function redactParams(message: string): string {
  const at = message.indexOf('\nparams:');
  return at === -1 ? message : `${message.slice(0, at)}\nparams: [redacted]`;
}
