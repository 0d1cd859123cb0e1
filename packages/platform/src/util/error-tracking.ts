import { redactParams } from './log.js';

type SdkCheckIn = Parameters<NonNullable<import('toucan-js').Toucan['captureCheckIn']>>[0];

/** Sentry Crons' monitor schedule, as the check-in protocol carries it (monitor_config.schedule). */
export type MonitorSchedule =
  | { type: 'crontab'; value: string }
  | { type: 'interval'; value: number; unit: 'minute' | 'hour' | 'day' };

export interface MonitorConfig {
  schedule: MonitorSchedule;
  /** Minutes a check-in may be late before the monitor counts it missed. */
  checkinMargin: number;
  /** Minutes a run may stay in_progress before it counts as timed out. */
  maxRuntime: number;
  /** Consecutive failed check-ins before Sentry opens an issue. */
  failureIssueThreshold: number;
}

export interface CheckIn {
  monitorSlug: string;
  status: 'in_progress' | 'ok' | 'error';
  /** The id that in_progress returned: the ok or error check-in closes that run. */
  checkInId?: string;
  /** Seconds. */
  duration?: number;
}

export interface ErrorTracker {
  capture(err: unknown, context?: Record<string, string>): void;
  /**
   * A Sentry Crons check-in (an envelope item of type `check_in`), upserting the monitor with
   * `monitorConfig`; returns the check-in id. Queued, never awaited: flush() delivers it.
   */
  checkIn?(checkIn: CheckIn, monitorConfig?: MonitorConfig): string | undefined;
  /** Waits (bounded) until queued events are sent; true when everything went out. */
  flush(timeoutMs: number): Promise<boolean>;
}

export const disabledErrorTracker: ErrorTracker = {
  capture: () => {},
  flush: async () => true,
};

/**
 * A Sentry-protocol client over fetch (toucan-js), so Node, Bun and Workers report the same way.
 * Throws on a malformed DSN; the boot step that calls this is advisory.
 */
export async function createErrorTracker(dsn: string): Promise<ErrorTracker> {
  assertDsn(dsn);
  // Loaded only when a DSN is configured: the SDK is a noticeable share of boot time.
  const { Toucan } = await import('./toucan.js');
  const toucan = new Toucan({
    dsn,
    // Query parameters in wrapped driver errors can be credentials or customer data.
    beforeSend(event) {
      for (const exception of event.exception?.values ?? []) {
        if (exception.value) exception.value = redactParams(exception.value);
      }
      return event;
    },
  });
  return {
    // Tags travel as the event's capture context: withScope() would clone the client, and flush()
    // on ours would then not wait for the event.
    capture: (err, context) => void toucan.captureException(err, { captureContext: { tags: context ?? {} } }),
    // Straight to the client: Toucan's own captureCheckIn also sets a `monitor` context on the shared
    // scope, which would then tag every later error, a request's included, with the last tick's name.
    // The client builds the envelope (@sentry/core server-runtime-client.ts: check_in_id,
    // monitor_slug, status, duration, monitor_config { schedule, checkin_margin, max_runtime, ... }).
    checkIn: (checkIn, monitorConfig) =>
      // Our CheckIn is the SDK's union (in_progress, or ok/error with the id) flattened into one type.
      toucan.getClient()?.captureCheckIn?.(checkIn as SdkCheckIn, monitorConfig),
    flush: async (timeoutMs) => (await toucan.getClient()?.flush(timeoutMs)) ?? true,
  };
}

// The DSN is a credential: the error says what is wrong with it without repeating it.
function assertDsn(dsn: string): void {
  const url = URL.canParse(dsn) ? new URL(dsn) : undefined;
  const projectId = url?.pathname.split('/').pop();
  if (!url || !/^https?:$/.test(url.protocol) || !url.username || !projectId || !/^\d+$/.test(projectId)) {
    throw new Error('SENTRY_DSN is malformed: expected http(s)://<public key>@<host>/<project id>');
  }
}
