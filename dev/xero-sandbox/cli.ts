// Runs the Xero sandbox until SIGINT/SIGTERM:  tsx dev/xero-sandbox/cli.ts [--port 4010] [--host 127.0.0.1]
// Prints one JSON line with its URLs and the test client's credentials. Development only.
import { parseArgs } from 'node:util';
import { startXeroSandbox } from './server.js';

const { values } = parseArgs({
  options: {
    port: { type: 'string', default: '4010' },
    host: { type: 'string', default: '127.0.0.1' },
    'client-id': { type: 'string' },
    'client-secret': { type: 'string' },
  },
});

const port = Number(values.port);
if (!Number.isInteger(port) || port < 0 || port > 65535) {
  console.error(`invalid --port ${values.port}`);
  process.exit(2);
}

const sandbox = await startXeroSandbox({
  port,
  host: values.host,
  ...(values['client-id'] ? { clientId: values['client-id'] } : {}),
  ...(values['client-secret'] ? { clientSecret: values['client-secret'] } : {}),
});

console.log(
  JSON.stringify({
    ...sandbox.urls,
    clientId: sandbox.state.client.clientId,
    clientSecret: sandbox.state.client.clientSecret,
  }),
);

const stop = () => {
  sandbox.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.once('SIGINT', stop);
process.once('SIGTERM', stop);
