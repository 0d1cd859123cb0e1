import { redactParams } from './log.js';

type SdkClient = import('./sentry-sdk.js').CloudflareClient;
type SdkCheckIn = Parameters<SdkClient['captureCheckIn']>[0];
type SdkMonitorConfig = Parameters<SdkClient['captureCheckIn']>[1];
// Enough for a driver error wrapped a few times (Drizzle's around the driver's, ours around that).
const LINKED_ERRORS = 5;

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
 * A Sentry-protocol client over fetch (Sentry's own SDK: @sentry/cloudflare's client, built by hand),
 * so Node, Bun and the errors Tail Worker report the same way. Throws on a malformed DSN; the boot step
 * that calls this is advisory.
 */
export async function createErrorTracker(dsn: string): Promise<ErrorTracker> {
  assertDsn(dsn);
  // Loaded only when a DSN is configured: the SDK is a noticeable share of boot time.
  const sdk = await import('./sentry-sdk.js');
  const client = new sdk.CloudflareClient({
    dsn,
    // No dedupe: each failing tick run is an event of its own (alert rules count them); Sentry groups
    // them into one issue anyway.
    integrations: [sdk.functionToStringIntegration(), sdk.linkedErrorsIntegration({ limit: LINKED_ERRORS })],
    stackParser: sdk.createStackParser(sdk.nodeStackLineParser()),
    transport: (options) =>
      sdk.createTransport(options, async (request) => {
        // The envelope is a string or bytes; TypeScript's DOM types want the bytes over a plain ArrayBuffer.
        const body = request.body as string | Uint8Array<ArrayBuffer>;
        const res = await fetch(options.url, { method: 'POST', headers: options.headers, body });
        return {
          statusCode: res.status,
          headers: {
            'x-sentry-rate-limits': res.headers.get('x-sentry-rate-limits'),
            'retry-after': res.headers.get('retry-after'),
          },
        };
      }),
    // Query parameters in wrapped driver errors can be credentials or customer data.
    beforeSend(event) {
      for (const exception of event.exception?.values ?? []) {
        if (exception.value) exception.value = redactParams(exception.value);
      }
      return event;
    },
  });
  client.init();
  // Our own scope, not the SDK's global ones: nothing but what each capture says is attached.
  const scope = new sdk.Scope();
  scope.setClient(client);
  return {
    capture: (err, context) => {
      const captured = scope.clone();
      captured.setTags(context ?? {});
      captured.captureException(err);
    },
    // The client builds the envelope (@sentry/core server-runtime-client: check_in_id, monitor_slug,
    // status, duration, monitor_config { schedule, checkin_margin, max_runtime, ... }).
    checkIn: (checkIn, monitorConfig) =>
      // Our CheckIn is the SDK's union (in_progress, or ok/error with the id) flattened into one type.
      client.captureCheckIn(checkIn as SdkCheckIn, monitorConfig as SdkMonitorConfig, scope),
    flush: (timeoutMs) => client.flush(timeoutMs),
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
