import { startCluster } from './test/support/postgres.ts';
import { spawnServer } from './test/support/server.ts';
import { freshDatabase } from './test/support/databases.ts';
const cluster = await startCluster({});
try {
  const url = await freshDatabase(cluster);
  for (let i = 0; i < 2; i++) {
  const t0 = Date.now();
  const s = await spawnServer({ env: { DATABASE_URL: url } });
  await s.waitForReady();
  console.log('ready after', Date.now() - t0);
  for (const l of s.logs) console.log(String(l.time ?? '').slice(11), (new Date(l.time as string).getTime() - t0), l.msg?.slice(0, 90));
  await s.stop();
  }
} finally { await cluster.remove(); }
