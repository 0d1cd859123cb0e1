import { errorCode } from '../error-chain.js';
import type { Logger } from '../log.js';
import { noTelemetry, type Telemetry } from '../telemetry/telemetry.js';
import type { DatabaseHandle } from './handle.js';

export type DatabaseStatus = 'ok' | 'unreachable' | 'read_only' | 'timeout';

export interface ProbeResult {
  status: DatabaseStatus;
  latencyMs: number;
  /** Short and secret-free: a SQLSTATE, an errno code or a fixed phrase, never a driver message. */
  reason?: string;
}

export interface WriteProbeOptions {
  /** The probe's own small pool: a saturated application pool must not look like an outage. */
  probe: DatabaseHandle;
  /** Disposed together with the probe pool when the database turns out read-only. */
  app: DatabaseHandle;
  timeoutMs: number;
  instanceId: string;
  log: Logger;
  /** Counts each probe by outcome, with its latency. */
  telemetry?: Telemetry;
}

// One round trip that proves a write: the upsert fails with 25006 on a standby or a read-only
// session, and the two settings catch anything that lets the write through but is still not a primary.
const PROBE_SQL = `
WITH beat AS (
  INSERT INTO health_heartbeat AS h (instance_id, beat_at, beats) VALUES ($1, now(), 1)
  ON CONFLICT (instance_id) DO UPDATE SET beat_at = excluded.beat_at, beats = h.beats + 1
  RETURNING 1
)
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only') AS read_only,
       (SELECT count(*) FROM beat) AS wrote`;

const READ_ONLY_SQLSTATE = '25006';

interface ProbeRow extends Record<string, unknown> {
  in_recovery: boolean;
  read_only: string;
}

export class WriteProbe {
  #inFlight: Promise<ProbeResult> | undefined;
  #last: ProbeResult | undefined;

  constructor(private readonly options: WriteProbeOptions) {}

  /** The most recent settled result, if any. */
  get last(): ProbeResult | undefined {
    return this.#last;
  }

  /** Concurrent callers share the probe in flight; the next call after it settles runs a new one. */
  check(): Promise<ProbeResult> {
    this.#inFlight ??= this.#run()
      .then((result) => {
        this.#last = result;
        (this.options.telemetry ?? noTelemetry).metrics.probe(result.status, result.latencyMs / 1000);
        return result;
      })
      .finally(() => {
        this.#inFlight = undefined;
      });
    return this.#inFlight;
  }

  async #run(): Promise<ProbeResult> {
    const { probe, timeoutMs } = this.options;
    const started = performance.now();
    const generation = probe.generation;
    const elapsed = () => Math.round(performance.now() - started);
    let timer: ReturnType<typeof setTimeout> | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const query = probe.pool.query<ProbeRow>(PROBE_SQL, [this.options.instanceId]);
      // The losing query is left to the pool's own timeouts, which destroy its connection.
      query.catch(() => {});
      const outcome = await Promise.race([query, timeout]);
      if (outcome === 'timeout')
        return { status: 'timeout', latencyMs: elapsed(), reason: `no answer in ${timeoutMs} ms` };
      const row = outcome.rows[0];
      if (row?.in_recovery === true) return this.#readOnly(elapsed(), 'in recovery', generation);
      if (row?.read_only === 'on') return this.#readOnly(elapsed(), 'transaction_read_only', generation);
      return { status: 'ok', latencyMs: elapsed() };
    } catch (err) {
      const code = errorCode(err);
      if (code === READ_ONLY_SQLSTATE) return this.#readOnly(elapsed(), code, generation);
      return { status: 'unreachable', latencyMs: elapsed(), reason: code ?? 'error' };
    } finally {
      clearTimeout(timer);
    }
  }

  // A read-only answer means our connections are pinned to a demoted node: throw both pools away so
  // the next probe and the next query connect afresh and reach whatever is primary now.
  #readOnly(latencyMs: number, reason: string, generation: number): ProbeResult {
    const { app, probe, log } = this.options;
    log.warn('database is read-only; disposing pools', { reason });
    // The swap is synchronous; ending the old pools waits for their queries, so it is not awaited here.
    void probe.dispose('probe read_only', generation);
    void app.dispose('probe read_only');
    return { status: 'read_only', latencyMs, reason };
  }
}
