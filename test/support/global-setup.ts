import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { prepareMigratedTemplate } from './migrated-template.js';
import { INITDB_TEMPLATE_ENV, prepareInitdbTemplate, startCluster } from './postgres.js';
import { SUITE_SECRETS, scanForSecrets } from './secret-scan.js';
import { SERVER_LOG_ENV } from './server.js';
import type { SharedPostgres } from './shared-postgres.js';
import { WORKER_BUNDLES_ENV } from './wrangler.js';

// Tests spawn the server the way a user runs it (`node dist/node.js`), so build it once per run.
// Every spawned server's output is collected in one file, and at the end of the run it must not hold
// a single secret the tests configured or made: a finding fails the run.
// And one Postgres cluster for the files that only need databases (shared-postgres.ts), with a migrated
// template database to copy (migrated-template.ts). And a directory for the Worker bundles the files
// build once for the whole run (wrangler.ts, workerBundle).
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  execFileSync(process.execPath, ['tools/build.mjs'], { stdio: 'inherit' });
  // One initdb for the run: every cluster, this one included, starts from a copy of it (postgres.ts).
  const initdbTemplate = await prepareInitdbTemplate();
  process.env[INITDB_TEMPLATE_ENV] = initdbTemplate.dataDir;
  // Two files at a time, each with servers whose pools hold connections of their own.
  const cluster = await startCluster({ settings: { max_connections: 500 } });
  await prepareMigratedTemplate(cluster);
  const shared: SharedPostgres = {
    port: cluster.port,
    dir: cluster.dir,
    dataDir: cluster.dataDir,
    logFile: cluster.logFile,
  };
  project.provide('sharedPostgres', shared);
  const dir = mkdtempSync(join(tmpdir(), 'honest-health-test-logs-'));
  const file = join(dir, 'servers.log');
  process.env[SERVER_LOG_ENV] = file;
  const bundles = mkdtempSync(join(tmpdir(), 'honest-health-worker-bundles-'));
  process.env[WORKER_BUNDLES_ENV] = bundles;
  return async () => {
    rmSync(bundles, { recursive: true, force: true });
    await cluster.remove();
    initdbTemplate.remove();
    const text = existsSync(file) ? readFileSync(file, 'utf8') : '';
    rmSync(dir, { recursive: true, force: true });
    const findings = scanForSecrets(text, SUITE_SECRETS);
    const lines = text === '' ? 0 : text.split('\n').length - 1;
    console.log(`secret scan: ${lines} log lines of spawned servers, ${findings.length} secrets found`);
    if (findings.length > 0) {
      const shown = findings.slice(0, 20).map((f) => `  ${f.name}, line ${f.lineNumber}: ${f.line}`);
      // Vitest reports an error thrown here but still exits 0: set the exit code as well.
      process.exitCode = 1;
      throw new Error(`secrets in the logs of this test run:\n${shown.join('\n')}`);
    }
  };
}
