import { startCluster } from './test/support/postgres.ts';
import { spawnServer } from './test/support/server.ts';
import { freshDatabase } from './test/support/databases.ts';
import { readFileSync } from 'node:fs';
const cluster = await startCluster({});
const cpu = (pid: number) => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10; };
const clusterCpu = () => { let t = 0; for (const line of readFileSync('/proc/stat','utf8').split('\n')) if (line.startsWith('cpu ')) { const v = line.split(/\s+/).slice(1,4).map(Number); t = (v[0]!+v[1]!+v[2]!)*10; } return t; };
try {
  for (const mode of ['empty', 'migrated', 'empty', 'migrated', 'cache', 'cache']) {
    const url = mode === 'migrated' ? (globalThis as any).lastUrl : await freshDatabase(cluster);
    const t0 = performance.now(); const m0 = clusterCpu();
    const s = await spawnServer({ env: { DATABASE_URL: url, ...(mode === 'cache' ? { NODE_COMPILE_CACHE: '/tmp/hh-ccache' } : {}) } });
    await s.waitForReady();
    const ms = performance.now() - t0; const c = cpu(s.child.pid!); const m = clusterCpu() - m0;
    await s.stop();
    (globalThis as any).lastUrl = url;
    console.log(mode, 'ready ms', Math.round(ms), 'server cpu ms', c, 'machine cpu ms', m);
  }
} finally { await cluster.remove(); }
