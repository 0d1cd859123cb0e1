// Run as its own process by test/idle-cpu.test.ts: how often an otherwise idle event loop turns over,
// first bare, then holding the Node/Bun metrics registry, then after one scrape. Node counts the turns
// itself: monitorEventLoopDelay in per-iteration mode samples once per turn and "does not keep the
// loop alive or force additional iterations" (perf_hooks docs). Prints one JSON line.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { createPromRegistry } from '@honest-health/platform/internal/metrics/prom-registry';

const WINDOW_MS = 1000;
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** Loop turns during WINDOW_MS of doing nothing. */
async function turns(): Promise<number> {
  const counter = monitorEventLoopDelay({ samplePerIteration: true });
  counter.enable();
  await sleep(WINDOW_MS);
  counter.disable();
  return counter.count;
}

await sleep(200); // the loader's start-up work settles first
const bare = await turns();
const registry = createPromRegistry({ onCollectError: () => {} });
const unscraped = await turns();
const firstScrape = await registry.render();
const scraped = await turns();
const lastScrape = await registry.render();
console.log(JSON.stringify({ bare, unscraped, scraped, firstScrape, lastScrape }));
