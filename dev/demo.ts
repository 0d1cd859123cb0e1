// `npm run demo`: the whole system on one machine. Starts the Xero sandbox and the server on the
// embedded database, creates an organization, connects it through the real OAuth flow, submits a few
// invoices (the first push meets an injected Xero 503) and prints each invoice's journey to `pushed`.
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createLogger, loadConfig } from '@honest-health/platform';
import { migrate } from '@honest-health/platform/db';
import { openDriver } from '../src/app/databases.js';
import { migrations } from '../src/app/migrations.gen.js';
import { createOrganization } from '../src/app/organizations.js';
import { startXeroSandbox } from './xero-sandbox/server.js';

const entry = resolve('dist/node.js');
const work = mkdtempSync(join(tmpdir(), 'honest-health-demo-'));
const say = (line: string) => console.log(`${new Date().toISOString().slice(11, 23)}  ${line}`);
let server: ChildProcess | undefined;
let sandbox: Awaited<ReturnType<typeof startXeroSandbox>> | undefined;

async function main(): Promise<void> {
  sandbox = await startXeroSandbox({ port: 0 });
  say(`Xero sandbox on ${sandbox.url}`);

  say('creating an organization in a fresh embedded database (PGlite, first start takes a few seconds)');
  const config = loadConfig({ DATABASE_URL: undefined });
  const driver = openDriver(
    { ...config, database: { driver: 'pglite', dataDir: join(work, '.data/pglite') } },
    createLogger('warn'),
  );
  await driver.ready();
  const pool = driver.createPool('app');
  await migrate(pool, migrations, createLogger('warn'));
  const org = await createOrganization(pool.db, 'Demo Ltd');
  await driver.close();
  say(`organization "${org.name}" created; API key ${org.apiKey.slice(0, 12)}… (shown once, stored hashed)`);

  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  server = spawn(process.execPath, [entry], {
    cwd: work,
    stdio: ['ignore', 'ignore', 'inherit'],
    env: {
      PATH: process.env.PATH,
      PORT: String(port),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'error',
      TICK_INTERVAL_MS: '1000',
      PUSH_BACKOFF_BASE_MS: '1500',
      XERO_API_URL: sandbox.url,
      XERO_IDENTITY_URL: `${sandbox.url}/identity`,
      XERO_AUTHORIZE_URL: `${sandbox.url}/identity/connect/authorize`,
      XERO_REDIRECT_URI: `${base}/connect/xero/callback`,
      XERO_CLIENT_ID: 'sandbox-client',
      XERO_CLIENT_SECRET: 'sandbox-secret',
    },
  });
  server.on('exit', (code) => code && say(`server exited with ${code}`));
  await waitFor(async () => (await fetch(`${base}/readyz`).catch(() => undefined))?.status === 200, 60_000);
  say(`server ready on ${base} (readiness proves the database takes writes)`);

  const auth = { authorization: `Bearer ${org.apiKey}` };
  // The connect flow as a browser walks it: a one-time link, the cookie it sets, Xero, the callback.
  const minted = await fetch(`${base}/api/connect-links`, { method: 'POST', headers: auth });
  const { url: link } = (await minted.json()) as { url: string };
  const toXero = await fetch(link, { redirect: 'manual' });
  const cookie = (toXero.headers.getSetCookie()[0] ?? '').split(';')[0] ?? '';
  const approved = await fetch(toXero.headers.get('location') ?? '', { redirect: 'manual' });
  const callback = await fetch(approved.headers.get('location') ?? '', {
    headers: { cookie, accept: 'application/json' },
  });
  const connected = (await callback.json()) as {
    connected: { id: string; tenantName: string }[];
  };
  say(
    `connected to Xero tenant "${connected.connected[0]?.tenantName}" through a one-time link and the OAuth flow (PKCE, browser-bound); tokens stored encrypted`,
  );
  // A new connection receives nothing until the organization chooses it (docs/api.md).
  const chosen = await fetch(`${base}/api/connections/${connected.connected[0]?.id}/default`, {
    method: 'POST',
    headers: auth,
  });
  say(`POST /api/connections/{id}/default: ${chosen.status}; invoices without tenantId go there`);

  sandbox.state.faults.add({ target: 'invoices', kind: '503', count: 1 });
  say('injected a Xero 503 for the next invoice call');
  const ids: string[] = [];
  // List items carry no invoice (docs/api.md): the reference is remembered from each POST.
  const references = new Map<string, string>();
  for (const [n, customer] of ['Aroha Cafe', 'Kauri Builders', 'Tui Books'].entries()) {
    const res = await fetch(`${base}/api/invoices`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', 'idempotency-key': `demo-${n + 1}` },
      body: JSON.stringify({
        contact: { name: customer },
        lineItems: [{ description: 'Consulting', quantity: String(n + 1), unitAmount: '120.00' }],
        date: '2026-11-29',
        currency: 'NZD',
        reference: `DEMO-${n + 1}`,
      }),
    });
    const invoice = (await res.json()) as { id: string; status: string };
    ids.push(invoice.id);
    references.set(invoice.id, `DEMO-${n + 1}`);
    say(`POST /api/invoices ${customer}: ${res.status} ${invoice.status}`);
  }

  const seen = new Map<string, string>();
  await waitFor(async () => {
    const list = (await (await fetch(`${base}/api/invoices?limit=10`, { headers: auth })).json()) as {
      data: {
        id: string;
        status: string;
        attempts: number;
        lastError: string | null;
        xeroInvoiceId: string | null;
      }[];
    };
    for (const i of list.data) {
      // A claim counts the attempt before it is made: keyed on the outcome, an attempt in flight is not
      // printed as if it had already failed.
      const state = `${i.status}/${i.lastError}`;
      if (seen.get(i.id) === state) continue;
      seen.set(i.id, state);
      const detail = i.status === 'pushed' ? `Xero invoice ${i.xeroInvoiceId}` : (i.lastError ?? '');
      say(`${references.get(i.id)}: ${i.status} after ${i.attempts} attempt(s) ${detail}`);
    }
    return list.data.length === ids.length && list.data.every((i) => i.status === 'pushed');
  }, 60_000);
  const stats = sandbox.state.statsSnapshot();
  say(
    `all ${ids.length} invoices pushed; Xero holds ${Object.values(stats.invoicesCreated).reduce((a, b) => a + b, 0)} (no duplicates)`,
  );
}

async function waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('the demo timed out');
    await new Promise((r) => setTimeout(r, 250));
  }
}

function freePort(): Promise<number> {
  return new Promise((done, fail) => {
    const probe = createServer();
    probe.once('error', fail);
    probe.listen(0, '127.0.0.1', () => {
      const address = probe.address();
      probe.close(() => done(typeof address === 'object' && address ? address.port : 0));
    });
  });
}

async function cleanup(): Promise<void> {
  if (server && server.exitCode === null) {
    server.kill('SIGTERM');
    await new Promise((r) => server?.once('exit', r));
  }
  await sandbox?.close();
  rmSync(work, { recursive: true, force: true });
}

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void cleanup().then(() => process.exit(130)));
try {
  await main();
  await cleanup();
} catch (err) {
  console.error(err);
  await cleanup();
  process.exit(1);
}
