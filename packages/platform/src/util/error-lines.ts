import type { CheckIn, ErrorTracker, MonitorConfig } from './error-tracking.js';
import { redactParams } from './log.js';

// Error reports as console lines, for a Tail Worker to send on (runtimes/worker-error-tail.ts): a Worker
// bundle without an error-tracking SDK writes each report as one JSON line, and the Tail Worker
// receives its console lines once the invocation ends (developers.cloudflare.com/workers/observability/logs/tail-workers/).

/** The field that marks a console line as an error report, and says which kind. */
export const ERROR_LINE = 'error_report';

export interface ErrorLineError {
  name: string;
  message: string;
  stack?: string;
  cause?: ErrorLineError;
}

export type ErrorLine =
  | { [ERROR_LINE]: 'exception'; error: ErrorLineError; tags: Record<string, string> }
  | {
      [ERROR_LINE]: 'check_in';
      checkIn: Required<Pick<CheckIn, 'checkInId'>> & CheckIn;
      monitorConfig?: MonitorConfig;
    };

// Enough of a chain for a driver error wrapped a few times; a cycle or a long chain stops here.
const CAUSE_DEPTH = 5;
// A line stays well inside what a trace item carries; Sentry's SDK cuts an exception's value to
// 250 characters anyway (maxValueLength), and parses at most 50 stack frames.
const MESSAGE_CHARS = 2048;
const STACK_CHARS = 8192;

function lineError(err: unknown, depth = 0): ErrorLineError {
  const e = err instanceof Error ? err : new Error(String(err));
  // Query parameters in wrapped driver errors can be credentials or customer data (as log.ts redacts).
  const out: ErrorLineError = {
    name: e.name,
    message: redactParams(e.message).slice(0, MESSAGE_CHARS),
    ...(e.stack ? { stack: redactParams(e.stack).slice(0, STACK_CHARS) } : {}),
  };
  if (e.cause !== undefined && depth < CAUSE_DEPTH) out.cause = lineError(e.cause, depth + 1);
  return out;
}

/** The error a line describes, rebuilt for an SDK (name, message, stack and causes as sent). */
export function errorOfLine(e: ErrorLineError): Error {
  const err = new Error(e.message, e.cause ? { cause: errorOfLine(e.cause) } : undefined);
  err.name = e.name;
  if (e.stack) err.stack = e.stack;
  return err;
}

/**
 * An ErrorTracker that writes its reports as console lines for a Tail Worker. Check-in ids are made
 * here, so that a run's ok or error closes the in_progress the Tail Worker sends first.
 */
export function errorLineTracker(write: (line: string) => void = (line) => console.log(line)): ErrorTracker {
  return {
    capture: (err, context) =>
      write(JSON.stringify({ [ERROR_LINE]: 'exception', error: lineError(err), tags: context ?? {} })),
    checkIn: (checkIn, monitorConfig) => {
      const checkInId = checkIn.checkInId ?? crypto.randomUUID().replaceAll('-', '');
      write(JSON.stringify({ [ERROR_LINE]: 'check_in', checkIn: { ...checkIn, checkInId }, monitorConfig }));
      return checkInId;
    },
    flush: async () => true,
  };
}

/** The report a console argument carries, if it is one. */
export function parseErrorLine(arg: unknown): ErrorLine | undefined {
  if (typeof arg !== 'string' || !arg.includes(ERROR_LINE)) return undefined;
  try {
    const line = JSON.parse(arg) as Partial<Record<typeof ERROR_LINE, unknown>>;
    return line[ERROR_LINE] === 'exception' || line[ERROR_LINE] === 'check_in'
      ? (line as ErrorLine)
      : undefined;
  } catch {
    return undefined;
  }
}
