import { connect, type Socket } from 'node:net';

/**
 * Opens `count` connections first, then writes one GET on each in the same tick, so the requests
 * really are concurrent at the server (fetch would trickle them in as its pool opens sockets).
 * Resolves with each response's status code.
 */
export async function burst(port: number, path: string, count: number): Promise<number[]> {
  const sockets = await Promise.all(
    Array.from(
      { length: count },
      () =>
        new Promise<Socket>((done, fail) => {
          const s = connect({ port, host: '127.0.0.1' }, () => done(s));
          s.once('error', fail);
        }),
    ),
  );
  const answers = sockets.map(
    (s) =>
      new Promise<number>((done, fail) => {
        let head = '';
        s.on('data', (chunk: Buffer) => {
          head += chunk.toString('latin1');
          const match = /^HTTP\/1\.1 (\d{3})/.exec(head);
          if (match) {
            s.destroy();
            done(Number(match[1]));
          }
        });
        s.once('error', fail);
      }),
  );
  for (const s of sockets) s.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n`);
  return Promise.all(answers);
}
