// Webhook delivery benchmark: deliveries per second and the latency from an event to its delivery, on a
// real Postgres and receivers on 127.0.0.1 (the development setting on). Events are made the real way,
// by POST-equivalent cancels whose statement writes the outbox.
//   drain   — BENCH_EVENTS events over BENCH_ORGS organizations (one endpoint each) already queued; two
//             delivery loops (two owners, as two replicas) drain them: deliveries per second;
//   latency — one event every BENCH_GAP_MS for BENCH_TRICKLE_MS while the loops poll every BENCH_POLL_MS;
//             event to receipt, p50 and p95, with one more organization whose receiver never answers
//             within the timeout (BENCH_TIMEOUT_MS), then the same trickle without it: the ratio of the
//             other organizations' latency with the slow endpoint to without it (1 when it holds none back).
// Deliveries go through the Node sender (pinned-send.ts), as on Node and Bun.
// Last line: `result: deliveries_per_s=… latency_p50_ms=… latency_p95_ms=… slow_endpoint_p50_ms=…
// slow_endpoint_p95_ms=… slow_endpoint_p50_ratio=… slow_endpoint_p95_ratio=…`.
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { sql } from 'drizzle-orm';
import { cancelPush } from '../src/app/invoices/control.js';
import { createOrganization } from '../src/app/organizations.js';
import { type DeliveryDeps, deliverDueWebhooks } from '../src/app/webhooks/deliver.js';
import { createEndpoint } from '../src/app/webhooks/endpoints.js';
import { pinnedSender } from '../src/app/webhooks/pinned-send.js';
import { freshDatabase } from '../test/support/databases.js';
import { startCluster } from '../test/support/postgres.js';
import { captureLog, openDatabase, testBox } from '../test/support/ticks.js';
import { intEnv, printResults, progress, table } from './support/report.js';

const EVENTS = intEnv('BENCH_EVENTS', 2000);
const ORGS = intEnv('BENCH_ORGS', 8);
const GAP_MS = intEnv('BENCH_GAP_MS', 20);
const TRICKLE_MS = intEnv('BENCH_TRICKLE_MS', 5000);
const POLL_MS = intEnv('BENCH_POLL_MS', 50);
const TIMEOUT_MS = intEnv('BENCH_TIMEOUT_MS', 1000);

const received: { id: string; at: number; eventAt: number }[] = [];

async function receiver(delayMs = 0) {
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => {
      body += c;
    });
    req.on('end', () => {
      const at = Date.now();
      const event = JSON.parse(body) as { timestamp: string; data: { id: string } };
      setTimeout(() => {
        if (delayMs === 0) received.push({ id: event.data.id, at, eventAt: Date.parse(event.timestamp) });
        res.writeHead(204).end();
      }, delayMs);
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, server };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? Number.NaN;
};

async function main() {
  const cluster = await startCluster();
  const { log } = captureLog();
  const url = await freshDatabase(cluster);
  const handle = await openDatabase(url, log);
  const db = handle.db;
  const box = await testBox();
  const receivers = await Promise.all(Array.from({ length: ORGS }, () => receiver()));
  const slow = await receiver(TIMEOUT_MS * 3);
  const orgs = [];
  for (const [i, r] of receivers.entries()) {
    const org = await createOrganization(db, `Bench ${i}`);
    await createEndpoint(db, box, org.id, r.url);
    orgs.push(org);
  }
  const slowOrg = await createOrganization(db, 'Bench slow');
  await createEndpoint(db, box, slowOrg.id, slow.url);

  const send = pinnedSender();
  let n = 0;
  const event = async (orgId: string) => {
    const rows = await db.execute<{ id: string }>(sql`
      INSERT INTO invoice_pushes (organization_id, idempotency_key, request_hash, payload, status)
      VALUES (${orgId}, ${`bench-${++n}`}, 'bench', '{}'::jsonb, 'awaiting_connection') RETURNING id`);
    const id = (rows as unknown as { rows: { id: string }[] }).rows[0]?.id as string;
    await cancelPush(db, orgId, id);
  };
  const deps = (owner: string): DeliveryDeps => ({
    owner,
    box,
    log,
    concurrency: 32,
    perEndpoint: 4,
    windowMs: TIMEOUT_MS,
    pollMs: POLL_MS,
    timeoutMs: TIMEOUT_MS,
    maxResponseBytes: 64 * 1024,
    backoff: { baseMs: 1000, maxMs: 10_000 },
    retryForMs: 3 * 86_400_000,
    allowInsecure: true,
    send,
  });
  let stop = false;
  const loop = async (name: string, pollMs: number) => {
    for (let run = 0; !stop; run++) {
      const r = await deliverDueWebhooks(db, deps(`${name}-${run}`));
      if (r.claimed === 0) await new Promise((res) => setTimeout(res, pollMs));
    }
  };

  progress(`drain: ${EVENTS} events over ${ORGS} endpoints`);
  for (let i = 0; i < EVENTS; i++) await event(orgs[i % ORGS]?.id as string);
  const started = Date.now();
  const loops = [loop('a', 5), loop('b', 5)];
  while (received.length < EVENTS) await new Promise((r) => setTimeout(r, 5));
  const drainMs = Date.now() - started;
  stop = true;
  await Promise.all(loops);
  const perSecond = EVENTS / (drainMs / 1000);

  progress(
    `latency: one event every ${GAP_MS} ms for ${TRICKLE_MS} ms, polling every ${POLL_MS} ms, with a slow endpoint`,
  );
  received.length = 0;
  stop = false;
  const trickleLoops = [loop('c', POLL_MS), loop('d', POLL_MS)];
  const sent = new Set<number>();
  const t0 = Date.now();
  let k = 0;
  while (Date.now() - t0 < TRICKLE_MS) {
    await event(orgs[k % ORGS]?.id as string);
    sent.add(k++);
    // The slow organization gets one event in ten.
    if (k % 10 === 0) await event(slowOrg.id);
    await new Promise((r) => setTimeout(r, GAP_MS));
  }
  while (received.length < k && Date.now() - t0 < TRICKLE_MS + 30_000)
    await new Promise((r) => setTimeout(r, 10));
  stop = true;
  await Promise.all(trickleLoops);
  const latencies = received.map((r) => r.at - r.eventAt);
  const p50 = pct(latencies, 50);
  const p95 = pct(latencies, 95);

  // The same trickle without the slow endpoint, for comparison.
  progress('latency again without the slow endpoint');
  await db.execute(sql`DELETE FROM webhook_endpoints WHERE organization_id = ${slowOrg.id}`);
  received.length = 0;
  stop = false;
  const calmLoops = [loop('e', POLL_MS), loop('f', POLL_MS)];
  const t1 = Date.now();
  let m = 0;
  while (Date.now() - t1 < TRICKLE_MS) {
    await event(orgs[m++ % ORGS]?.id as string);
    await new Promise((r) => setTimeout(r, GAP_MS));
  }
  while (received.length < m && Date.now() - t1 < TRICKLE_MS + 30_000)
    await new Promise((r) => setTimeout(r, 10));
  stop = true;
  await Promise.all(calmLoops);
  const calm = received.map((r) => r.at - r.eventAt);

  console.log(
    table([
      ['phase', 'events', 'figure'],
      ['drain', String(EVENTS), `${perSecond.toFixed(0)} deliveries/s (${drainMs} ms)`],
      ['trickle + slow endpoint (others)', String(k), `p50 ${p50} ms, p95 ${p95} ms`],
      ['trickle alone', String(m), `p50 ${pct(calm, 50)} ms, p95 ${pct(calm, 95)} ms`],
    ]),
  );
  printResults(
    'webhooks',
    { events: EVENTS, orgs: ORGS, poll_ms: POLL_MS, timeout_ms: TIMEOUT_MS, drain_ms: drainMs },
    {
      deliveries_per_s: perSecond,
      latency_p50_ms: pct(calm, 50),
      latency_p95_ms: pct(calm, 95),
      slow_endpoint_p50_ms: p50,
      slow_endpoint_p95_ms: p95,
      // Other organizations' latency with a slow endpoint present over without it.
      slow_endpoint_p50_ratio: p50 / pct(calm, 50),
      slow_endpoint_p95_ratio: p95 / pct(calm, 95),
    },
  );
  for (const r of [...receivers, slow]) r.server.close();
  slow.server.closeAllConnections();
  await handle.close();
  await cluster.remove();
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
