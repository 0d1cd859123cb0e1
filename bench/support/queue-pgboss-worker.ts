// The baseline: pg-boss with a no-op handler in its own process, constructed with pg-boss's defaults.
// Each `go` starts one `boss.work` on the run's queue with the run's options (absent ones stay at
// pg-boss's defaults: batchSize 1, pollingIntervalSeconds 2); `stop` ends that worker.
import PgBoss from 'pg-boss';
import { childConfig, fromParent, report, serve } from './queue-child.js';

interface Config {
  url: string;
}

const config = childConfig<Config>();

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
    const options: PgBoss.WorkOptions = {};
    if (typeof go.batchSize === 'number') options.batchSize = go.batchSize;
    if (typeof go.pollingIntervalSeconds === 'number')
      options.pollingIntervalSeconds = go.pollingIntervalSeconds;
    let handled = 0;
    let fetches = 0;
    const errorsBefore = stats.errors;
    await boss.work(queue, options, async (jobs) => {
      fetches += 1;
      handled += jobs.length;
    });
    report({ type: 'working' });
    await fromParent('stop');
    await boss.offWork(queue);
    return { handled, fetches, errors: stats.errors - errorsBefore };
  },
  ({ boss }) => boss.stop({ graceful: true, wait: true, timeout: 5000 }),
);
