// A TCP proxy that can reset, black-hole and re-point connections, to stage network faults in tests.
//
// It runs on a worker thread of its own. On the caller's thread it would share one event loop with
// whatever else the test or benchmark does there (HTTP clients, log parsing), and Node 20's libuv
// accepts one connection per event-loop iteration (libuv PR #3696): when that loop is busy or
// starved of CPU, new connections wait in the listen backlog for every slow iteration ahead of them
// (measured: 15-27 waiting, ~1 s each, during the failover bench's reconnect storms), and every
// relayed byte waits for an iteration too. A real network path adds neither delay.
import { MessageChannel, Worker } from 'node:worker_threads';

export interface FaultProxy {
  /** The port the proxy listens on, at 127.0.0.1. */
  readonly port: number;
  /** Re-points NEW connections; open ones stay pinned to the target they were opened against. */
  setTarget(port: number, host?: string): void;
  /** Resets every open connection: clients see ECONNRESET. */
  dropAll(): void;
  /**
   * While on, nothing is forwarded in either direction and new connections are accepted but never
   * dialled upstream; sockets stay open. Turning it off resets the connections that were black-holed
   * (their protocol streams lost bytes) and lets new connections through again.
   */
  blackhole(on: boolean): void;
  /** Open client connections. */
  connectionCount(): number;
  close(): Promise<void>;
}

type Command =
  | { type: 'target'; port: number; host: string }
  | { type: 'drop' }
  | { type: 'hole'; on: boolean }
  | { type: 'close' };

// Shared Int32 slots: the worker publishes its open-connection count and acknowledges each command.
const COUNT = 0;
const APPLIED = 1;
// A command returns once the worker has applied it (as the in-thread proxy did); a worker that does
// not answer within this is broken, and the caller hears about it.
const COMMAND_TIMEOUT_MS = 10_000;

// Plain JavaScript (a CommonJS script): the worker runs without the TypeScript loader of its parent.
const WORKER_SOURCE = `
const { createConnection, createServer } = require('node:net');
const { workerData } = require('node:worker_threads');
const { control, shared, port: initialPort, host: initialHost } = workerData;
const COUNT = ${COUNT};
const APPLIED = ${APPLIED};

let target = { port: initialPort, host: initialHost };
let holeOn = false;
const links = new Set();
const publish = () => Atomics.store(shared, COUNT, links.size);

const kill = (link, reset) => {
  links.delete(link);
  publish();
  // No reset once the socket is shutting down (the client hung up and node answered the FIN):
  // libuv refuses it there and node then never closes the handle, and a thread with an open handle
  // cannot exit (it spins in its cleanup). The client is going away anyway.
  if (reset && !link.client.destroyed && !link.client.writableEnded) link.client.resetAndDestroy();
  else link.client.destroy();
  if (link.upstream) link.upstream.destroy();
};

// Relays a chunk, pausing the source while the destination's buffer is full.
const relay = (chunk, from, to) => {
  if (!to.write(chunk)) {
    from.pause();
    to.once('drain', () => from.resume());
  }
};

const server = createServer((client) => {
  const link = { client, upstream: undefined, blackholed: holeOn };
  links.add(link);
  publish();
  client.setNoDelay(true);
  client.on('error', (error) => {
    // The same node behaviour, whatever the cause: a failed reset leaves the handle open; close it.
    if (error && error.syscall === 'reset' && client._handle) client._handle.close();
    kill(link, false);
  });
  client.on('close', () => kill(link, false));
  client.on('data', (chunk) => {
    if (!link.blackholed && link.upstream) relay(chunk, client, link.upstream);
  });
  if (link.blackholed) return; // accepted, swallowed, never dialled

  // Pinned: the target is read once, here. Writes before 'connect' are queued by node.
  const upstream = createConnection(target);
  link.upstream = upstream;
  upstream.setNoDelay(true);
  upstream.on('data', (chunk) => {
    if (!link.blackholed) relay(chunk, upstream, client);
  });
  upstream.on('error', () => {}); // handled by 'close' below
  upstream.on('close', (hadError) => {
    if (link.blackholed || !links.has(link)) return; // a partition hides the server going away
    if (hadError) kill(link, true);
    else {
      links.delete(link);
      publish();
      client.end(); // server closed cleanly: pass the FIN on
    }
  });
});

const acknowledge = () => {
  Atomics.add(shared, APPLIED, 1);
  Atomics.notify(shared, APPLIED);
};

control.on('message', (command) => {
  switch (command.type) {
    case 'target':
      target = { port: command.port, host: command.host };
      break;
    case 'drop':
      for (const link of [...links]) kill(link, true);
      break;
    case 'hole':
      holeOn = command.on;
      for (const link of [...links]) {
        if (command.on) link.blackholed = true;
        else if (link.blackholed) kill(link, true);
      }
      break;
    case 'close':
      for (const link of [...links]) kill(link, false);
      server.close(() => {
        acknowledge();
        control.close();
      });
      return;
  }
  acknowledge();
});

server.once('error', (error) => control.postMessage({ type: 'failed', message: error.message }));
server.listen({ port: 0, host: '127.0.0.1' }, () => {
  const address = server.address();
  control.postMessage({ type: 'listening', port: address.port });
});
`;

export async function startFaultProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<FaultProxy> {
  const shared = new Int32Array(new SharedArrayBuffer(2 * Int32Array.BYTES_PER_ELEMENT));
  const { port1: control, port2: workerControl } = new MessageChannel();
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    execArgv: [], // none of the parent's loaders (tsx, vitest): the worker needs only node's builtins
    workerData: { control: workerControl, shared, port: targetPort, host: targetHost },
    transferList: [workerControl],
  });
  let failure: Error | undefined;
  const exited = new Promise<void>((resolve) =>
    worker.once('exit', (code) => {
      failure ??= new Error(`the fault proxy worker exited (${code})`);
      resolve();
    }),
  );
  worker.on('error', (error) => {
    failure ??= error;
  });

  const port = await new Promise<number>((resolve, reject) => {
    void exited.then(() => reject(failure));
    control.once('message', (message: { type: string; port?: number; message?: string }) => {
      if (message.type === 'listening' && typeof message.port === 'number') return resolve(message.port);
      reject(new Error(`the fault proxy did not start: ${message.message ?? message.type}`));
      control.close();
      void worker.terminate();
    });
  });

  let host = targetHost;
  let closing: Promise<void> | undefined;
  // Sends a command and blocks until the worker has applied it, so that whatever the caller does next
  // (take a timestamp, open a connection) already meets the new state, as with an in-thread proxy.
  const command = (cmd: Command): void => {
    if (closing) throw new Error('the fault proxy is closed');
    if (failure) throw new Error(`the fault proxy worker failed: ${failure.message}`);
    const applied = Atomics.load(shared, APPLIED);
    control.postMessage(cmd);
    const deadline = performance.now() + COMMAND_TIMEOUT_MS;
    while (Atomics.load(shared, APPLIED) === applied) {
      const left = deadline - performance.now();
      if (left <= 0)
        throw new Error(`the fault proxy did not apply "${cmd.type}" in ${COMMAND_TIMEOUT_MS} ms`);
      Atomics.wait(shared, APPLIED, applied, left);
    }
  };

  return {
    port,
    setTarget(port, newHost = host) {
      host = newHost;
      command({ type: 'target', port, host: newHost });
    },
    dropAll() {
      command({ type: 'drop' });
    },
    blackhole(on) {
      command({ type: 'hole', on });
    },
    connectionCount: () => Atomics.load(shared, COUNT),
    close() {
      // The worker ends every link, closes its server and exits; terminate() is the fallback.
      closing ??= (async () => {
        if (!failure) control.postMessage({ type: 'close' } satisfies Command);
        const timer = setTimeout(() => void worker.terminate(), COMMAND_TIMEOUT_MS);
        await exited;
        clearTimeout(timer);
        control.close();
      })();
      return closing;
    },
  };
}
