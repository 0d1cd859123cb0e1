// Runs the Node sender (src/app/webhooks/pinned-send.ts) once under whichever runtime runs this file, for
// test/webhooks.test.ts to check DNS pinning under the real bun binary: `<url> <answers, comma-separated>`.
// Prints one JSON line: the status, or the error's name and message, and the names resolved.
import { pinnedSender } from '../../src/app/webhooks/pinned-send.js';

const [url = '', answers = ''] = process.argv.slice(2);
const asked: string[] = [];
const send = pinnedSender(async (host) => {
  asked.push(host);
  return answers.split(',').filter(Boolean);
});
try {
  const status = await send(new URL(url), {
    headers: { 'content-type': 'application/json' },
    body: '{}',
    timeoutMs: 5000,
    maxResponseBytes: 1024,
    allowLoopback: true,
  });
  console.log(JSON.stringify({ status, asked }));
} catch (err) {
  console.log(JSON.stringify({ error: (err as Error).name, message: (err as Error).message, asked }));
}
