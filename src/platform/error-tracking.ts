import { redactParams } from './log.js';

export interface ErrorTracker {
  capture(err: unknown, context?: Record<string, string>): void;
  /** Waits (bounded) until queued events are sent; true when everything went out. */
  flush(timeoutMs: number): Promise<boolean>;
}

export const disabledErrorTracker: ErrorTracker = {
  capture: () => {},
  flush: async () => true,
};

export interface ErrorTrackerOptions {
  environment?: string;
  release?: string;
  /** Workers: keeps the isolate alive until the event is delivered. */
  waitUntil?: (promise: Promise<unknown>) => void;
}

/**
 * A Sentry-protocol client over fetch (toucan-js), so Node, Bun and Workers report the same way.
 * Throws on a malformed DSN; the boot step that calls this is advisory.
 */
export async function createErrorTracker(
  dsn: string,
  options: ErrorTrackerOptions = {},
): Promise<ErrorTracker> {
  assertDsn(dsn);
  // Loaded only when a DSN is configured: the SDK is a noticeable share of boot time.
  const { Toucan } = await import('./toucan.js');
  const { waitUntil, ...rest } = options;
  const toucan = new Toucan({
    dsn,
    ...rest,
    ...(waitUntil ? { context: { waitUntil } } : {}),
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
