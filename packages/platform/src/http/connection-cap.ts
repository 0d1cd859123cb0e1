import { readFileSync } from 'node:fs';

// How many HTTP connections a process may hold: below its descriptor limit (RLIMIT_NOFILE), with a
// reserve for what else needs a descriptor (database pools, the PGlite data files, log pipes, the
// descriptors the runtime itself holds), so the process never meets EMFILE because of idle clients.

/** The soft RLIMIT_NOFILE, read from /proc (Linux); undefined elsewhere or when unlimited. */
export function descriptorLimit(limitsFile = '/proc/self/limits'): number | undefined {
  try {
    // "Max open files            1024                 1048576              files"
    const line = readFileSync(limitsFile, 'utf8')
      .split('\n')
      .find((l) => l.startsWith('Max open files'));
    const soft = line?.slice('Max open files'.length).trim().split(/\s+/)[0];
    return soft !== undefined && /^\d+$/.test(soft) ? Number(soft) : undefined;
  } catch {
    return undefined;
  }
}

/** A tenth of the limit, and never fewer than 64 descriptors. */
export const descriptorReserve = (limit: number) => Math.max(64, Math.ceil(limit / 10));

export interface ConnectionCap {
  max: number | undefined;
  /** Where the number came from, for the log line at listen. */
  source: 'setting' | 'descriptor limit' | 'none';
  descriptorLimit: number | undefined;
}

export function connectionCap(setting: number | 'auto', limit: number | undefined): ConnectionCap {
  if (setting !== 'auto') return { max: setting, source: 'setting', descriptorLimit: limit };
  if (limit === undefined) return { max: undefined, source: 'none', descriptorLimit: undefined };
  return {
    max: Math.max(16, limit - descriptorReserve(limit)),
    source: 'descriptor limit',
    descriptorLimit: limit,
  };
}
