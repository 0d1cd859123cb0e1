import { errorCode } from '../util/error-chain.js';
import type { Logger } from '../util/log.js';
import { noTelemetry, type Telemetry } from '../util/telemetry.js';
import { PROBE_READ_ONLY } from './disposal.js';
import type { FailoverEpisodes } from './episode.js';
import type { DatabaseHandle } from './handle.js';

/** What the write probe found: `ok` (it took a write), `read_only`, `unreachable` or `timeout`. */
export type DatabaseStatus = 'ok' | 'unreachable' | 'read_only' | 'timeout';

/** One write probe's answer: its status, latency and a secret-free reason. */
export interface ProbeResult {
  status: DatabaseStatus;
  latencyMs: number;
  /** Short and secret-free: a SQLSTATE, an errno code or a fixed phrase, never a driver message. */
  reason?: string;
  /** The server's replication settings, read in the same round trip (docs/durability.md). */
  replication?: ReplicationSettings;
}

/** When a commit is acknowledged: only with a synchronous standby does it survive a failover. */
export interface ReplicationSettings {
  synchronous_commit: string;
  /**
   * synchronous_standby_names itself is read but never shown: it names the standbys (their
   * application_name, often a host), which /readyz?verbose, open to anyone, has no need to say.
   * synchronous_commit is on, remote_write or remote_apply and a synchronous standby is named. */
  commit_waits_for_standby: boolean;
}

export interface WriteProbeOptions {
  /** The probe's own small pool: a saturated application pool must not look like an outage. */
  probeDatabase: DatabaseHandle;
  /** Disposed together with the probe pool when the database turns out read-only. */
  appDatabase: DatabaseHandle;
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
       current_setting('synchronous_commit') AS synchronous_commit,
       current_setting('synchronous_standby_names') AS synchronous_standby_names,
       (SELECT count(*) FROM beat) AS wrote`;

const READ_ONLY_SQLSTATE = '25006';

interface ProbeRow extends Record<string, unknown> {
  in_recovery: boolean;
  read_only: string;
  synchronous_commit: string;
  synchronous_standby_names: string;
}

// https://www.postgresql.org/docs/current/runtime-config-replication.html: with
// synchronous_standby_names empty, or synchronous_commit local/off, a commit waits for no standby.
const WAITS_FOR_STANDBY = new Set(['on', 'remote_write', 'remote_apply']);

function replicationOf(row: ProbeRow): ReplicationSettings | undefined {
  if (typeof row.synchronous_commit !== 'string') return undefined;
  const names = String(row.synchronous_standby_names ?? '');
  return {
    synchronous_commit: row.synchronous_commit,
    commit_waits_for_standby: WAITS_FOR_STANDBY.has(row.synchronous_commit) && names.trim() !== '',
  };
}

export class WriteProbe {
  #inFlight: Promise<ProbeResult> | undefined;
  #last: ProbeResult | undefined;
  #lastAt = 0;

  constructor(private readonly options: WriteProbeOptions) {}

  /** The most recent settled result, if any. */
  get last(): ProbeResult | undefined {
    return this.#last;
  }

  /** Seconds since the last probe settled; undefined before the first. */
  get ageSeconds(): number | undefined {
    return this.#last === undefined ? undefined : (performance.now() - this.#lastAt) / 1000;
  }

  /**
   * A result at most `maxAgeMs` old: the last one if it is young enough, else a probe (shared with
   * any in flight, so a scrape and a /readyz at once still cost one). Bounded by the probe timeout.
   */
  fresh(maxAgeMs: number): Promise<ProbeResult> {
    const age = this.ageSeconds;
    if (this.#last !== undefined && age !== undefined && age * 1000 <= maxAgeMs && !this.#inFlight) {
      return Promise.resolve(this.#last);
    }
    return this.check();
  }

  /** Concurrent callers share the probe in flight; the next call after it settles runs a new one. */
  check(): Promise<ProbeResult> {
    this.#inFlight ??= this.#run()
      .then((result) => {
        this.#last = result;
        this.#lastAt = performance.now();
        (this.options.telemetry ?? noTelemetry).metrics.probe(result.status, result.latencyMs / 1000);
        if (result.status === 'ok') for (const e of this.#episodes()) e.healthy();
        return result;
      })
      .finally(() => {
        this.#inFlight = undefined;
      });
    return this.#inFlight;
  }

  async #run(): Promise<ProbeResult> {
    const { probeDatabase: probe, timeoutMs } = this.options;
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
      const replication = row ? replicationOf(row) : undefined;
      return { status: 'ok', latencyMs: elapsed(), ...(replication ? { replication } : {}) };
    } catch (err) {
      const code = errorCode(err);
      if (code === READ_ONLY_SQLSTATE) return this.#readOnly(elapsed(), code, generation);
      return { status: 'unreachable', latencyMs: elapsed(), reason: code ?? 'error' };
    } finally {
      clearTimeout(timer);
    }
  }

  #episodes(): Set<FailoverEpisodes> {
    return new Set([this.options.appDatabase.episodes, this.options.probeDatabase.episodes]);
  }

  // A read-only answer means our connections are pinned to a demoted node: throw both pools away so
  // the next probe and the next query connect afresh and reach whatever is primary now. The episode
  // logs the warning (once) and damps the disposals of pools built since it began (episode.ts).
  #readOnly(latencyMs: number, reason: string, generation: number): ProbeResult {
    const { appDatabase: app, probeDatabase: probe, log } = this.options;
    for (const e of this.#episodes()) e.sign('probe', reason, 'probe');
    log.debug('database is read-only; disposing pools', { reason });
    // The swap is synchronous; ending the old pools waits for their queries, so it is not awaited here.
    void probe.dispose(PROBE_READ_ONLY, generation);
    void app.dispose(PROBE_READ_ONLY);
    return { status: 'read_only', latencyMs, reason };
  }
}
