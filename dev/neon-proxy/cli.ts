// Runs the local Neon proxy until SIGINT/SIGTERM:
//   tsx dev/neon-proxy/cli.ts --upstream postgres://postgres@127.0.0.1:5432/postgres [--port 4444] [--host 127.0.0.1]
// Prints one JSON line: where it listens and the neonConfig settings that point the driver at it.
import { parseArgs } from 'node:util';
import { startNeonProxy } from './server.js';

const USAGE =
  'usage: tsx dev/neon-proxy/cli.ts --upstream postgres://user@127.0.0.1:5432/db [--port 4444] [--host 127.0.0.1]';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      upstream: { type: 'string' },
      port: { type: 'string', default: '4444' },
      host: { type: 'string', default: '127.0.0.1' },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    return;
  }
  if (values.upstream === undefined) throw new Error(`--upstream is required\n${USAGE}`);
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) throw new Error(`invalid --port ${values.port}`);

  const proxy = await startNeonProxy({ upstream: values.upstream, port, host: values.host });
  const hostPort = proxy.url.replace(/^http:\/\//, '');
  // The upstream minus any password: a connection string for the driver (its host is ignored).
  const connectionString = new URL(values.upstream);
  connectionString.password = '';

  process.stdout.write(
    `${JSON.stringify({
      event: 'listening',
      url: proxy.url,
      upstream: `${proxy.upstream.host}:${proxy.upstream.port}`,
      connectionString: connectionString.href,
      neonConfig: {
        fetchEndpoint: `${proxy.url}/sql`,
        wsProxy: `${hostPort}/v2`,
        useSecureWebSocket: false,
        pipelineConnect: false,
      },
      notes: [
        'neonConfig.fetchEndpoint is global: neon() has no per-call endpoint option',
        "in Node < 22 also set neonConfig.webSocketConstructor = (await import('ws')).WebSocket",
      ],
    })}\n`,
  );

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(1); // a second signal: give up waiting
    stopping = true;
    proxy.close().then(
      () => process.exit(0),
      (error: unknown) => {
        process.stderr.write(`neon-proxy: error while closing on ${signal}: ${String(error)}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`neon-proxy: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
