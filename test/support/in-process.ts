// The app in process, on PGlite: the module's routes inside the platform's HTTP shell, served the way
// the process lifecycle serves them (packages/platform/src/lifecycle/process.ts, "bind listener"), but called
// with `shell.request()` instead of through a socket. No child process, no cluster, no network. The
// database is the embedded driver (packages/platform/src/db/drivers/pglite.ts) on a data directory of its own.

import type { DatabaseDriver } from '@honest-health/platform';
import { createLogger, type Logger, loadConfig } from '@honest-health/platform';
import type { DatabaseHandle } from '@honest-health/platform/db';
import { migrate } from '@honest-health/platform/db';
import { ReadinessGate } from '@honest-health/platform/internal/http/gate';
import { createShell, type ServedScope } from '@honest-health/platform/internal/http/shell';
import { createDatabases } from '@honest-health/platform/internal/lifecycle/databases';
import { disabledErrorTracker } from '@honest-health/platform/internal/util/error-tracking';
import { noTelemetry } from '@honest-health/platform/internal/util/telemetry';
import { openDriver } from '../../src/app/databases.js';
import { honestHealth } from '../../src/app/module.js';
import { honestHealthProcess } from '../../src/app/process-module.js';
import { freshPgliteDir } from './pglite-template.js';
import { TEST_LIMITS, TEST_TOKEN_KEY } from './server.js';

export interface InProcessApp {
  /** `shell.request()` with this app's scope: a path (or URL) and a RequestInit. */
  request(path: string, init?: RequestInit): Promise<Response>;
  database: DatabaseHandle;
  gate: ReadinessGate;
  /** The same app and database behind another gate (a second shell, as another boot would build). */
  behind(gate: ReadinessGate): (path: string, init?: RequestInit) => Promise<Response>;
  /** Ticks the requests asked to run soon (scope.schedule), in order. */
  scheduled: string[];
  /** Resolves when the work requests left running (scope.waitUntil) has settled. */
  background(): Promise<void>;
  /** Every log line, parsed. */
  lines: Record<string, unknown>[];
  /** Reloads the app's registries (the API-key registry), as the refresh loop does. */
  reloadIndexes(): Promise<void>;
  close(): Promise<void>;
}

export interface InProcessOptions {
  env?: Record<string, string>;
  /** Serve over this driver and skip migrations and registries (a database that is not there). */
  driver?: DatabaseDriver;
}

function capturingLog(): { log: Logger; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  return { log: createLogger('debug', {}, (line) => lines.push(JSON.parse(line))), lines };
}

/** Boots honest-health in process: a fresh PGlite, migrated, its indexes loaded, the gate open. */
export async function startInProcess(options: InProcessOptions = {}): Promise<InProcessApp> {
  const env = { TOKEN_ENCRYPTION_KEY: TEST_TOKEN_KEY, ...TEST_LIMITS, ...options.env };
  const data = options.driver ? undefined : await freshPgliteDir();
  const config = loadConfig(env);
  if (data) config.database = { driver: 'pglite', dataDir: data.dir };
  const appConfig = honestHealth.loadConfig(env);
  const { log, lines } = capturingLog();
  const instanceId = 'fast-layer';
  const app = await honestHealthProcess.create(appConfig, {
    lifecycle: 'process',
    instanceId,
    log,
    embedded: true,
  });

  const driver = options.driver ?? openDriver(config, log);
  const databases = createDatabases(driver, {
    log,
    telemetry: noTelemetry,
    probeTimeoutMs: config.probeTimeoutMs,
    instanceId,
  });
  const { appDatabase: database, probeDatabase, writeProbe } = databases;
  const reloadIndexes = async () => {
    for (const registry of app.registries) await registry.load(database.db);
  };
  if (!options.driver) {
    await driver.ready();
    await migrate(database.pool, honestHealthProcess.migrations, log, {
      timeoutMs: config.migrationLockTimeoutMs,
    });
    await reloadIndexes();
  }

  const ticks = app.ticks.map(({ name, intervalMs }) => ({ name, intervalMs }));
  const scheduled: string[] = [];
  const background: Promise<unknown>[] = [];
  const scope: ServedScope = {
    database,
    probeDatabase,
    writeProbe,
    schedule: (tick) => void scheduled.push(tick),
    waitUntil: (work) => void background.push(work),
  };
  const behind = (gate: ReadinessGate) => {
    const shell = createShell({
      app,
      gate,
      log,
      errors: disabledErrorTracker,
      telemetry: noTelemetry,
      metrics: { token: undefined, render: async () => '' },
      tickHealth: {
        ticks,
        policy: { intervals: 3, failures: 2, startedAtMs: Date.now() },
        token: undefined,
        timeoutMs: config.probeTimeoutMs,
        log,
      },
    });
    return async (path: string, init?: RequestInit) => shell.request(path, init, scope);
  };
  // The last boot step.
  const gate = new ReadinessGate();
  gate.open();

  return {
    request: behind(gate),
    behind,
    database,
    gate,
    scheduled,
    background: async () => void (await Promise.allSettled(background)),
    lines,
    reloadIndexes,
    close: async () => {
      try {
        await Promise.allSettled(background);
        await databases.close();
      } finally {
        data?.remove();
      }
    },
  };
}
