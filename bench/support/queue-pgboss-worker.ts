// The baseline: pg-boss 12 with a no-op handler in its own process, constructed with pg-boss's defaults.
// Each `go` works the run's queue one of two ways:
//   work  — one `boss.work` with the run's options (absent ones stay at pg-boss's defaults: batchSize
//           1, pollingIntervalSeconds 2, localConcurrency 1, no burst); `stop` ends that worker. pg-boss
//           12's Worker loop waits out the polling interval after every fetch, jobs found or not, unless
//           a burst trigger is on: with `burstWhenBatchFull` it fetches again at once while fetches come
//           back full. `localConcurrency` runs that many such loops in the process.
//   fetch — pg-boss's own pull API, back to back: `boss.fetch(queue, { batchSize })` then one
//           `boss.complete(queue, jobs)`, until a fetch comes back empty. The same two statements
//           `work` runs per poll (its fetch, and its batch complete fenced to the attempts fetched, which
//           passing the jobs rather than their ids gets), minus any sleep between polls: the loop our
//           no-op worker runs, so neither side idles.
import { PgBoss, type WorkOptions } from 'pg-boss';
import { childConfig, fromParent, report, serve } from './queue-child.js';

interface Config {
  url: string;
}

const config = childConfig<Config>();

async function fetchLoop(boss: PgBoss, queue: string, batchSize: number) {
  let handled = 0;
  let fetches = 0;
  const started = performance.now();
  for (;;) {
    const jobs = await boss.fetch<unknown>(queue, { batchSize });
    fetches += 1;
    if (jobs.length === 0) break;
    handled += jobs.length;
    await boss.complete(queue, jobs);
  }
  return { handled, fetches, ms: Math.round(performance.now() - started) };
}

await serve(
  async () => {
    const boss = new PgBoss({ connectionString: config.url });
    const stats = { errors: 0 };
    boss.on('error', (err) => {
      stats.errors += 1;
      if (stats.errors <= 3) console.error(`pg-boss error: ${err.message}`);
    });
    await boss.start();
    return { boss, stats };
  },
  async ({ boss, stats }, go) => {
    const queue = String(go.queue);
    const errorsBefore = stats.errors;
    if (go.loop === 'fetch') {
      const r = await fetchLoop(boss, queue, Number(go.batchSize));
      report({ type: 'working' });
      await fromParent('stop');
      return { ...r, errors: stats.errors - errorsBefore };
    }
    const options: WorkOptions = {};
    if (typeof go.batchSize === 'number') options.batchSize = go.batchSize;
    if (typeof go.pollingIntervalSeconds === 'number')
      options.pollingIntervalSeconds = go.pollingIntervalSeconds;
    if (typeof go.localConcurrency === 'number') options.localConcurrency = go.localConcurrency;
    if (go.burstWhenBatchFull === true) options.burstWhenBatchFull = true;
    let handled = 0;
    let fetches = 0;
    await boss.work(queue, options, async (jobs) => {
      fetches += 1;
      handled += jobs.length;
    });
    report({ type: 'working' });
    await fromParent('stop');
    await boss.offWork(queue);
    return { handled, fetches, errors: stats.errors - errorsBefore };
  },
  ({ boss }) => boss.stop({ graceful: true, timeout: 5000 }),
);
