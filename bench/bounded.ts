// What a request may cost, measured as the "done when" asks, on one throwaway cluster:
// 1. three waves of BENCH_WAVE concurrent ~BENCH_WAVE_BYTES invoices to the Node server (default
//    configuration): RSS peak against idle, every answer, the largest 202 body;
// 2. BENCH_FLOOD unauthenticated connect requests with unknown links and states, 20 at a time: the
//    answers and the database transactions each costs over the idle rate (pg_stat_database);
// 3. a tenant with BENCH_HISTORY settled pushes: GET /api/invoices?status=dead (median of 5) and a
//    disconnect's time and the rows it wrote.
// Reports, never fails. `npm run -s build && npx tsx bench/bounded.ts`.

import pg from 'pg';
import { startXeroSandbox } from '../dev/xero-sandbox/server.js';
import { floodConnect } from '../test/support/connect-flood.js';
import { freshDatabase } from '../test/support/databases.js';
import { currentXid, rowsWrittenSince, seedHistory } from '../test/support/history.js';
import { createOrg, waitForKey } from '../test/support/orgs.js';
import { startCluster } from '../test/support/postgres.js';
import { captureLog, connectedGrant, openDatabase, sandboxEnv, testBox } from '../test/support/ticks.js';
import { bootToReady, stopServer } from './support/boot.js';
import { cleanupAll, runBench, track } from './support/lifecycle.js';
import { intEnv, printResults, progress, table } from './support/report.js';
import { largeInvoice, rssMib, rssWave, type WaveResult } from './support/rss-wave.js';
import { median, round1, round3 } from './support/stats.js';

const WAVES = 3;
const WAVE = intEnv('BENCH_WAVE', 32);
const WAVE_BYTES = intEnv('BENCH_WAVE_BYTES', 960_000);
const FLOOD = intEnv('BENCH_FLOOD', 4000);
const HISTORY = intEnv('BENCH_HISTORY', 1_000_000);
const sleep = (ms: number) => new Promise((done) => setTimeout(done, ms));

async function main(): Promise<void> {
  progress('starting a throwaway PostgreSQL cluster and the Xero sandbox');
  const cluster = await startCluster();
  track('cluster', () => cluster.remove());
  const sandbox = await startXeroSandbox({ port: 0 });
  track('sandbox', () => sandbox.close());

  // 1. Memory: the default REQUEST_BODIES_MAX_BYTES.
  const wavesDb = await freshDatabase(cluster, 'bounded_waves');
  const { server } = await bootToReady({
    env: { DATABASE_URL: wavesDb, LOG_LEVEL: 'warn', API_KEY_REFRESH_MS: '100', API_RATE_BURST: '1000' },
  });
  const org = await createOrg(wavesDb, 'Large Invoices Ltd');
  await waitForKey(server, org.apiKey);
  const body = JSON.stringify(largeInvoice(WAVE_BYTES));
  await sleep(2000);
  const idleMib = rssMib(server.child.pid);
  const waves: WaveResult[] = [];
  for (let w = 1; w <= WAVES; w++) {
    const wave = await rssWave({
      url: `${server.url}/api/invoices`,
      headers: { authorization: `Bearer ${org.apiKey}`, 'content-type': 'application/json' },
      body,
      count: WAVE,
      pid: server.child.pid,
      keyPrefix: `wave-${w}`,
    });
    waves.push(wave);
    progress(
      `wave ${w}: ${JSON.stringify(wave.statuses)}, RSS peak ${wave.rssPeakMib?.toFixed(1)} MiB, ` +
        `largest 2xx body ${wave.largest2xxBytes} B, ${Math.round(wave.ms)} ms`,
    );
  }
  const alive = (await fetch(`${server.url}/livez`)).status === 200;
  await stopServer(server);
  const peakMib = Math.max(...waves.map((w) => w.rssPeakMib ?? 0));
  const accepted = waves.map((w) => (w.statuses['202'] ?? 0) + (w.statuses['200'] ?? 0));
  const otherAnswers = waves.reduce(
    (n, w) =>
      n +
      Object.entries(w.statuses)
        .filter(([s]) => !['202', '200', '429', '503'].includes(s))
        .reduce((m, [, c]) => m + c, 0),
    0,
  );

  // 2. Strangers: the default per-address limit, the socket as the address.
  const floodDb = await freshDatabase(cluster, 'bounded_flood');
  const flooded = await bootToReady({
    env: {
      DATABASE_URL: floodDb,
      LOG_LEVEL: 'warn',
      TICK_INTERVAL_MS: '3600000',
      API_KEY_REFRESH_MS: '3600000',
      ...sandboxEnv(sandbox),
    },
  });
  const flood = await floodConnect({
    baseUrl: flooded.server.url,
    databaseUrl: floodDb,
    requests: FLOOD,
    concurrency: 20,
  });
  await stopServer(flooded.server);
  progress(`flood: ${JSON.stringify(flood)}`);
  const fiveHundreds = Object.entries(flood.statuses)
    .filter(([s]) => Number(s) >= 500)
    .reduce((n, [, c]) => n + c, 0);

  // 3. History.
  const historyDb = await freshDatabase(cluster, 'bounded_history');
  const handle = await openDatabase(historyDb, captureLog().log);
  const box = await testBox();
  const pool = new pg.Pool({ connectionString: historyDb, max: 2 });
  const connected = await connectedGrant(handle.db, box, sandbox, 'History Ltd', 1);
  const connectionId = connected.connectionIds[0] as string;
  progress(`seeding ${HISTORY} settled pushes`);
  const seedStarted = performance.now();
  await seedHistory(pool, {
    organizationId: connected.org.id,
    connectionId,
    tenantId: connected.tenantIds[0] as string,
    settled: HISTORY,
    settledReferencing: 0,
    open: 5,
  });
  progress(`seeded in ${Math.round((performance.now() - seedStarted) / 1000)} s`);
  const history = await bootToReady({
    env: { DATABASE_URL: historyDb, LOG_LEVEL: 'warn', TICK_INTERVAL_MS: '3600000', ...sandboxEnv(sandbox) },
  });
  const auth = { authorization: `Bearer ${connected.org.apiKey}` };
  await waitForKey(history.server, connected.org.apiKey);
  const listMs: number[] = [];
  for (let i = 0; i < 6; i++) {
    const started = performance.now();
    const res = await fetch(`${history.server.url}/api/invoices?status=dead&limit=20`, { headers: auth });
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`list answered ${res.status}`);
    if (i > 0) listMs.push(performance.now() - started);
  }
  const xid = await currentXid(pool);
  const disconnectStarted = performance.now();
  const disconnect = await fetch(`${history.server.url}/api/connections/${connectionId}`, {
    method: 'DELETE',
    headers: auth,
  });
  const disconnectMs = performance.now() - disconnectStarted;
  const written = await rowsWrittenSince(pool, xid);
  await stopServer(history.server);
  await pool.end();
  await handle.close();
  await cleanupAll();

  const figures = {
    wave_count: WAVE,
    wave_body_bytes: Buffer.byteLength(body),
    idle_rss_mib: round1(idleMib ?? Number.NaN),
    peak_rss_mib: round1(peakMib),
    peak_over_idle_mib: round1(peakMib - (idleMib ?? Number.NaN)),
    accepted_per_wave: accepted,
    answers: waves.map((w) => w.statuses),
    refused_without_retry_after: waves.reduce((n, w) => n + w.refusedWithoutRetryAfter, 0),
    other_answers: otherAnswers,
    largest_202_bytes: Math.max(...waves.map((w) => w.largest2xxBytes)),
    server_alive: alive,
    flood,
    history_rows: HISTORY,
    list_dead_ms: listMs.map(round1),
    list_dead_median_ms: round1(median(listMs)),
    disconnect_status: disconnect.status,
    disconnect_ms: round1(disconnectMs),
    disconnect_rows_written: written,
  };
  console.log(
    table([
      ['figure', 'value', 'done when'],
      [
        'RSS idle → peak over 3 waves (MiB)',
        `${figures.idle_rss_mib} → ${figures.peak_rss_mib}`,
        'peak < idle + 128',
      ],
      ['accepted per wave', accepted.join(', '), '≥ 8 each'],
      [
        'answers other than 2xx/429/503, refusals without Retry-After',
        `${otherAnswers}, ${figures.refused_without_retry_after}`,
        '0, 0',
      ],
      ['largest 202 body (bytes)', String(figures.largest_202_bytes), '< 4096'],
      ['server alive after the waves', String(alive), 'true'],
      ['flood: answers', JSON.stringify(flood.statuses), 'no 5xx'],
      ['flood: transactions per request over idle', round3(flood.xactsPerRequest).toString(), '≤ 0.05'],
      [`?status=dead, ${HISTORY} settled (median of 5, ms)`, String(figures.list_dead_median_ms), '< 200'],
      [
        'disconnect (ms), rows written',
        `${figures.disconnect_ms} (${disconnect.status}), ${written}`,
        '< 1000, history untouched',
      ],
    ]),
  );
  printResults('bounded', figures, {
    peak_over_idle_mib: figures.peak_over_idle_mib,
    min_accepted_per_wave: Math.min(...accepted),
    largest_202_bytes: figures.largest_202_bytes,
    flood_5xx: fiveHundreds,
    flood_xacts_per_request: flood.xactsPerRequest,
    list_dead_median_ms: figures.list_dead_median_ms,
    disconnect_ms: figures.disconnect_ms,
    disconnect_rows_written: written,
  });
}

await runBench(main);
