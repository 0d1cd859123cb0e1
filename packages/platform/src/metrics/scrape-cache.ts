// Readings that cost a database query (the push queue's COUNT … GROUP BY, the tick health table), shared
// by every scrape for a few seconds: a flood of scrapes runs one query per reading per window, and
// concurrent scrapes await the one in flight. Built once per process or isolate, outside any request.

/** How old a cached reading may be when a scrape serves it. Prometheus scrapes every 15 s to 1 min. */
export const SCRAPE_CACHE_MS = 5000;

export type ScrapeCache = <T>(name: string, read: () => Promise<T>) => Promise<T>;

export function createScrapeCache(maxAgeMs = SCRAPE_CACHE_MS, now = () => Date.now()): ScrapeCache {
  const entries = new Map<string, { at: number; value: unknown } | { inFlight: Promise<unknown> }>();
  return <T>(name: string, read: () => Promise<T>): Promise<T> => {
    const entry = entries.get(name);
    if (entry && 'inFlight' in entry) return entry.inFlight as Promise<T>;
    if (entry && now() - entry.at < maxAgeMs) return Promise.resolve(entry.value as T);
    // A failure is not kept: the next scrape reads again (still one read at a time).
    const inFlight = read().then(
      (value) => {
        entries.set(name, { at: now(), value });
        return value;
      },
      (err: unknown) => {
        if (entries.get(name) === stored) entries.delete(name);
        throw err;
      },
    );
    const stored = { inFlight };
    entries.set(name, stored);
    return inFlight;
  };
}
