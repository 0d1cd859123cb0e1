// Run as its own process by test/idle-cpu.test.ts: how often an otherwise idle event loop turns over,
// first bare, then holding the Node/Bun metrics registry, then after one scrape. Node counts the turns
// itself: monitorEventLoopDelay in per-iteration mode samples once per turn and "does not keep the
// loop alive or force additional iterations" (perf_hooks docs). Prints one JSON line.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createPromRegistry } from '@honest-health/platform/internal/metrics/prom-registry';

const WINDOW_MS = 1000;
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Loop turns during `ms` of doing nothing. */
async function turns(ms = WINDOW_MS): Promise<number> {
  const counter = monitorEventLoopDelay({ samplePerIteration: true });
  counter.enable();
  await sleep(ms);
  counter.disable();
  return counter.count;
}

// The loader's start-up work settles first: on a loaded machine it ran on into the first window.
for (let i = 0; i < 50 && (await turns(200)) > 2; i++);
const bare = await turns();
const registry = createPromRegistry({ onCollectError: () => {} });
const unscraped = await turns();
const firstScrape = await registry.render();
const scraped = await turns();
const lastScrape = await registry.render();
console.log(JSON.stringify({ bare, unscraped, scraped, firstScrape, lastScrape }));
