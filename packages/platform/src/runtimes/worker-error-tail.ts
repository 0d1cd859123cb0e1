import { errorOfLine, parseErrorLine } from '../util/error-lines.js';
import { createErrorTracker, type ErrorTracker } from '../util/error-tracking.js';
import type { ExecutionContextLike } from './worker.js';
import type { Bindings } from './worker-database.js';

/** What the handler reads of a Tail Worker's trace item (workerd's TraceItem). */
export interface TraceItemLike {
  scriptName?: string | null;
  outcome?: string;
  logs?: readonly { message?: readonly unknown[] }[];
  exceptions?: readonly { name?: string; message?: string; stack?: string }[];
}

const FLUSH_MS = 2000;

/**
 * A Tail Worker's `tail` handler that sends the error reports of the Workers it tails to Sentry: the
 * lines `tailErrorTracking` writes (errors with their tags, Crons check-ins), and every exception a
 * producer's invocation did not catch. SENTRY_DSN is this Worker's secret; without it, or with a
 * malformed one, reports are dropped. The SDK lives in this bundle only.
 *
 * @example
 * ```ts
 * // src/worker-errors.ts, deployed with its own wrangler file and named in the app's `tail_consumers`.
 * import { createErrorTail } from '@honest-health/platform/worker/error-tail';
 *
 * export default createErrorTail();
 * ```
 */
export function createErrorTail() {
  let tracker: Promise<ErrorTracker | undefined> | undefined;
  let trackerDsn: string | undefined;
  const trackerFor = (dsn: string) => {
    if (tracker === undefined || trackerDsn !== dsn) {
      trackerDsn = dsn;
      tracker = createErrorTracker(dsn).catch(() => undefined);
    }
    return tracker;
  };
  return {
    async tail(events: readonly TraceItemLike[], env: Bindings, ctx: ExecutionContextLike): Promise<void> {
      const dsn = typeof env.SENTRY_DSN === 'string' ? env.SENTRY_DSN : '';
      if (!dsn) return;
      const errors = await trackerFor(dsn);
      if (!errors) return;
      for (const event of events) {
        for (const log of event.logs ?? []) {
          for (const arg of log.message ?? []) {
            const line = parseErrorLine(arg);
            if (line?.error_report === 'exception') errors.capture(errorOfLine(line.error), line.tags);
            else if (line?.error_report === 'check_in') errors.checkIn?.(line.checkIn, line.monitorConfig);
          }
        }
        for (const e of event.exceptions ?? []) {
          const err = errorOfLine({ name: e.name ?? 'Error', message: e.message ?? '', stack: e.stack });
          errors.capture(err, {
            uncaught: 'true',
            script: event.scriptName ?? '',
            outcome: event.outcome ?? '',
          });
        }
      }
      ctx.waitUntil(errors.flush(FLUSH_MS));
    },
  };
}
