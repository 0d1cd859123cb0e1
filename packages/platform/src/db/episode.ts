import type { Logger } from '../util/log.js';
import type { PoolRole } from './types.js';

// A failover, or a database that stays read-only (a managed primary near a full disk), is one
// *episode*: it starts with the first sign of trouble (a read-only probe, a poisoned query) and ends
// with a probe that proves a write at least 5 s after the last sign (longer than a load balancer's
// alternation between the old and the new node, about 3 s when measured), or after a quiet minute.
// Per episode the log gets one warning when it starts and one summary with counts when it ends;
// every probe, poisoned query and disposal in between is counted, not logged at warn.
//
// Disposals are damped during an episode. The first disposal of each pool is immediate: that pool
// was built before the trouble and is pinned to the demoted node, which is the incident this project
// exists for. A pool built *during* the episode may well be read-only too (a load balancer still
// alternating between the old and the new node, a database read-only for good), so it is thrown away
// only once it has lived a minimum age that doubles with each disposal of that pool in the episode:
// 0.5 s, 1 s, 2 s ... capped at 30 s. A database that stays read-only for an hour then costs each pool
// about 6 + 3600/30 rebuilds instead of one per failing request. Damping keeps the contract that a
// request or tick that met poison retries once on a pool that can reach the new primary: a damped
// dispose closes the pool's idle connections (handle.ts), so the retry opens a fresh one, and a client
// whose query failed is released with the error and destroyed by the pool. A damped pool keeps only
// its connections in use, which fail (and go) or succeed on their own.
// The alternative, a fixed minimum age, either storms on a database that stays read-only (short age)
// or delays the incident's recovery (long age); doubling per episode gets both ends right.

export interface EpisodeOptions {
  /** Minimum age of a pool built during the episode before it may be disposed: the first step. */
  minPoolAgeMs?: number;
  /** The cap of the doubling minimum age. */
  maxPoolAgeMs?: number;
  /** A write-proving probe ends the episode only this long after the last sign of trouble (5 s). */
  settleMs?: number;
  /** Without any probe, the episode ends after this long with no sign of trouble. */
  quietMs?: number;
  now?: () => number;
}

export type EpisodeKind = 'read-only' | 'connection';

interface Episode {
  kind: EpisodeKind;
  startedAt: number;
  lastSignAt: number;
  probes: number;
  poisoned: number;
  disposals: Map<PoolRole, number>;
  damped: number;
}

/** What dispose() should do with the pool it was asked to throw away. */
export type DisposalDecision = 'dispose' | 'damp';

// The reasons sign() is given that mean read-only: the poison classifier's SQLSTATE (db/poison.ts) and
// the probe's findings (probe.ts).
const READ_ONLY_REASONS = new Set(['25006', 'in recovery', 'transaction_read_only']);

export class FailoverEpisodes {
  #open: Episode | undefined;
  #timer: ReturnType<typeof setTimeout> | undefined;
  readonly #minAge: number;
  readonly #maxAge: number;
  readonly #settle: number;
  readonly #quiet: number;
  readonly #now: () => number;

  constructor(
    private readonly log: Logger,
    options: EpisodeOptions = {},
  ) {
    this.#minAge = options.minPoolAgeMs ?? 500;
    this.#maxAge = options.maxPoolAgeMs ?? 30_000;
    this.#settle = options.settleMs ?? 5000;
    this.#quiet = options.quietMs ?? 60_000;
    this.#now = options.now ?? (() => performance.now());
  }

  /** The clock pool ages are measured on. */
  now(): number {
    return this.#now();
  }

  get active(): boolean {
    this.#endIfQuiet(this.#now());
    return this.#open !== undefined;
  }

  /** A sign of trouble: a read-only probe or a poisoned query. Opens an episode or extends it. */
  sign(kind: 'probe' | 'poison', reason: string, source: string): void {
    const now = this.#now();
    this.#endIfQuiet(now);
    const readOnly = READ_ONLY_REASONS.has(reason);
    let episode = this.#open;
    if (episode === undefined) {
      episode = {
        kind: readOnly ? 'read-only' : 'connection',
        startedAt: now,
        lastSignAt: now,
        probes: 0,
        poisoned: 0,
        disposals: new Map(),
        damped: 0,
      };
      this.#open = episode;
      this.log.warn(
        readOnly
          ? 'database read-only episode started: disposing pools'
          : 'database connection episode started: disposing pools',
        { reason, source },
      );
    } else if (readOnly) {
      episode.kind = 'read-only';
    }
    episode.lastSignAt = now;
    if (kind === 'probe') episode.probes += 1;
    else episode.poisoned += 1;
    this.#arm();
  }

  /**
   * Whether the pool of `role`, built at `builtAt` (this clock), may be thrown away now. Call after
   * sign(); outside an episode a disposal is never damped.
   */
  decide(role: PoolRole, builtAt: number): DisposalDecision {
    const episode = this.#open;
    if (episode === undefined) return 'dispose';
    const done = episode.disposals.get(role) ?? 0;
    if (builtAt >= episode.startedAt) {
      const minAge = Math.min(this.#minAge * 2 ** Math.max(0, done - 1), this.#maxAge);
      if (this.#now() - builtAt < minAge) {
        episode.damped += 1;
        return 'damp';
      }
    }
    episode.disposals.set(role, done + 1);
    return 'dispose';
  }

  /** A probe proved a write: the episode ends, unless trouble was seen a moment ago (flapping). */
  healthy(): void {
    const episode = this.#open;
    if (episode === undefined) return;
    const now = this.#now();
    if (now - episode.lastSignAt >= this.#settle) this.#end(now, 'write proven');
  }

  /** Shutdown: an open episode gets its summary now. */
  close(): void {
    if (this.#open) this.#end(this.#now(), 'shutdown');
  }

  #endIfQuiet(now: number): void {
    const episode = this.#open;
    if (episode !== undefined && now - episode.lastSignAt >= this.#quiet) {
      this.#end(episode.lastSignAt + this.#quiet, 'quiet');
    }
  }

  #end(at: number, endedBy: string): void {
    const episode = this.#open;
    if (episode === undefined) return;
    this.#open = undefined;
    clearTimeout(this.#timer);
    this.#timer = undefined;
    const seconds = Math.round((at - episode.startedAt) / 100) / 10;
    const disposals = [...episode.disposals.values()].reduce((a, b) => a + b, 0);
    this.log.warn(
      `database ${episode.kind} episode ended after ${seconds} s: ${disposals} disposals, ${episode.probes} probes`,
      {
        episode: episode.kind,
        ended_by: endedBy,
        seconds,
        disposals,
        disposals_app: episode.disposals.get('app') ?? 0,
        disposals_probe: episode.disposals.get('probe') ?? 0,
        damped: episode.damped,
        probes: episode.probes,
        poisoned: episode.poisoned,
      },
    );
  }

  // One timer per open episode, re-armed for the rest of the quiet spell when it fires early; it
  // never keeps a process alive. (On Workers a timer may not outlive the request: there the episode
  // ends at the next probe or the next sign instead.)
  #arm(): void {
    if (this.#timer !== undefined) return;
    const episode = this.#open;
    if (episode === undefined) return;
    const wait = Math.max(0, episode.lastSignAt + this.#quiet - this.#now());
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      this.#endIfQuiet(this.#now());
      this.#arm();
    }, wait);
    (this.#timer as { unref?: () => void }).unref?.();
  }
}
