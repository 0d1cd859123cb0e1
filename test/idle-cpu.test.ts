import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { createPromRegistry } from '@honest-health/platform/internal/metrics/prom-registry';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { parsePrometheus } from './support/prometheus.js';
import { repoRoot } from './support/server.js';

// The idle server's CPU was prom-client's event-loop lag monitor: a 10 ms timer, 100 loop turns a
// second with nothing to do (packages/platform/src/metrics/default-metrics.ts). What it costs in CPU is a
// benchmark figure (`npm run bench:idle`); what a test can hold is the behaviour: no monitor until
// the first scrape, every default metric served all the same.

const run = promisify(execFile);
const LAG = /^nodejs_eventloop_lag_/;
const names = (text: string) => new Set(parsePrometheus(text).map((family) => family.name));

describe('the metrics registry on an idle process', () => {
  it('adds no loop turns until the first scrape starts the event-loop lag monitor', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'test/support/idle-wakeups.ts'], {
      cwd: repoRoot,
    });
    const r = JSON.parse(stdout) as Record<'bare' | 'unscraped' | 'scraped', number> &
      Record<'firstScrape' | 'lastScrape', string>;
    // Bare, an idle loop turns a handful of times a second; prom-client's monitor made it ~100.
    expect(r.unscraped).toBeLessThanOrEqual(r.bare + 10);
    // Once scraped, the monitor runs as prom-client runs it (10 ms resolution) and its gauges are served.
    // Against the window before the scrape, not the bare one: on a loaded machine the loader's start-up
    // work can run on into the bare window.
    expect(r.scraped).toBeGreaterThan(r.unscraped + 50);
    expect([...names(r.firstScrape)].filter((n) => LAG.test(n))).toEqual([]);
    expect([...names(r.lastScrape)].filter((n) => LAG.test(n))).toContain('nodejs_eventloop_lag_p99_seconds');
  });

  it("serves every one of prom-client's default metrics from the second scrape on", async () => {
    const reference = new Registry();
    collectDefaultMetrics({ register: reference });
    const ours = createPromRegistry({ onCollectError: () => {} });
    await ours.render();
    const served = names(await ours.render());
    const expected = names(await reference.metrics());
    expect(expected.size).toBeGreaterThan(10);
    expect([...expected].filter((name) => !served.has(name))).toEqual([]);
    // And nothing of its own: the registry holds only the defaults here.
    expect([...served].filter((name) => !expected.has(name))).toEqual([]);
  });
});
