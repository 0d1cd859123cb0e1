// graphile-worker with a no-op task in its own process, a counterpart of bench/support/queue-pgboss-worker.ts.
// Each `go` starts a runner (`run()`) with the run's options on the (still empty) queue; absent options
// stay at graphile-worker's defaults (concurrency 1, maxPoolSize 10, pollInterval 2 s, no local queue,
// no completion batching). Once the runner listens for new jobs and has found none, the child says
// `working`; the parent then commits the jobs (graphile's own add_jobs, whose NOTIFY wakes the runner)
// and times the drain. `stop` stops the runner gracefully (a local queue hands back the jobs it holds).
import { EventEmitter, once } from 'node:events';
import { Logger, run, type WorkerEvents } from 'graphile-worker';
import { childConfig, fromParent, report, serve } from './queue-child.js';

interface Config {
  url: string;
}

const config = childConfig<Config>();

// graphile-worker logs every job at info; errors are what the run wants to see.
const logger = new Logger(() => (level, message) => {
  if (level === 'error') console.error(`graphile-worker: ${message}`);
});

await serve(
  async () => ({}),
  async (_state, go) => {
    const concurrency = typeof go.concurrency === 'number' ? go.concurrency : undefined;
    const localQueueSize = typeof go.localQueueSize === 'number' ? go.localQueueSize : undefined;
    const batchDelay = typeof go.batchDelayMs === 'number' ? go.batchDelayMs : undefined;
    let handled = 0;
    let errors = 0;
    // graphile-worker's events are a typed view of a plain EventEmitter.
    const events = new EventEmitter() as WorkerEvents;
    events.on('job:error', () => {
      errors += 1;
    });
    events.on('worker:fatalError', () => {
      errors += 1;
    });
    // Idle means: LISTEN is up (a NOTIFY will reach it) and the first fetch came back empty (so the
    // first NOTIFY meets an idle worker or local queue, not one halfway through a fetch).
    const listening = once(events, 'pool:listen:success');
    const idle =
      localQueueSize === undefined
        ? once(events, 'worker:getJob:empty')
        : new Promise<void>((done) =>
            events.on('localQueue:getJobs:complete', ({ jobs }) => {
              if (jobs.length === 0) done();
            }),
          );
    const runner = await run({
      connectionString: config.url,
      noHandleSignals: true,
      logger,
      events,
      parsedCronItems: [],
      taskList: {
        noop: async () => {
          handled += 1;
        },
      },
      ...(concurrency === undefined ? {} : { concurrency }),
      ...(typeof go.maxPoolSize === 'number' ? { maxPoolSize: go.maxPoolSize } : {}),
      preset: {
        worker: {
          ...(localQueueSize === undefined ? {} : { localQueue: { size: localQueueSize } }),
          ...(batchDelay === undefined
            ? {}
            : { completeJobBatchDelay: batchDelay, failJobBatchDelay: batchDelay }),
        },
      },
    });
    await Promise.all([listening, idle]);
    report({ type: 'working' });
    await fromParent('stop');
    await runner.stop();
    await runner.promise;
    return { handled, errors };
  },
  async () => {},
);
