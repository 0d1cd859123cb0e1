import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../log.js';

// Node's HTTP server keeps every connection a client opens until the client closes it. This guard
// (1) closes a connection that sits idle (no request in flight, no byte either way) for the idle
// timeout, and (2) keeps the number of open connections under a cap: at the cap a new connection
// closes the least recently active idle one, so a probe still gets in while idle sockets pile up;
// only when every connection has a request in flight is the new one refused. Both are logged,
// at most one line per LOG_WINDOW_MS with counts.
//
// Why not `server.maxConnections`: at the cap it drops the *new* connection (net.Server 'drop'), so
// 1,000 idle sockets would lock out the load balancer's health check, which is the failure to fix.

const LOG_WINDOW_MS = 10_000;

export interface ConnectionGuardOptions {
  /** Open connections at most; undefined: no cap. */
  max: number | undefined;
  idleTimeoutMs: number;
  log: Logger;
}

export interface ConnectionGuard {
  /** Open connections now. */
  readonly open: number;
}

export function guardConnections(server: Server, options: ConnectionGuardOptions): ConnectionGuard {
  const { max, log } = options;
  // Insertion order is activity order: a connection moves to the end whenever a response finishes,
  // so the first idle entry is the one that has waited longest.
  const connections = new Map<Socket, { inFlight: number }>();

  let counts = { closedIdle: 0, refused: 0, acceptErrors: 0 };
  let lastAcceptError: string | undefined;
  let window: ReturnType<typeof setTimeout> | undefined;
  const report = () => {
    const { closedIdle, refused, acceptErrors } = counts;
    if (closedIdle + refused + acceptErrors === 0) return;
    counts = { closedIdle: 0, refused: 0, acceptErrors: 0 };
    log.warn('http connection limit reached', {
      closed_idle: closedIdle,
      refused,
      ...(acceptErrors > 0 ? { accept_errors: acceptErrors, accept_error: lastAcceptError } : {}),
      open: connections.size,
      max_connections: max,
      window_ms: LOG_WINDOW_MS,
    });
  };
  const note = (kind: keyof typeof counts) => {
    counts[kind] += 1;
    if (window) return;
    report(); // the first of an episode at once, the rest summed up per window
    window = setTimeout(() => {
      window = undefined;
      report();
    }, LOG_WINDOW_MS);
    window.unref();
  };

  server.on('connection', (socket: Socket) => {
    if (max !== undefined && connections.size >= max) {
      const idle = firstIdle();
      if (idle) {
        idle.destroy();
        connections.delete(idle);
        note('closedIdle');
      } else {
        socket.destroy();
        note('refused');
        return;
      }
    }
    connections.set(socket, { inFlight: 0 });
    socket.once('close', () => connections.delete(socket));
  });

  server.on('request', (req, res) => {
    const socket = req.socket;
    const state = connections.get(socket);
    if (!state) return;
    state.inFlight += 1;
    res.once('close', () => {
      state.inFlight -= 1;
      if (state.inFlight === 0 && connections.has(socket)) {
        connections.delete(socket);
        connections.set(socket, state);
      }
    });
  });

  // The socket timeout fires after idleTimeoutMs without a byte either way. With a listener here Node
  // leaves the socket to us (http/server.js socketOnTimeout): close it only when no request is in
  // flight, so a slow but legitimate answer (a readiness probe bounded by PROBE_TIMEOUT_MS) is not cut.
  server.setTimeout(options.idleTimeoutMs);
  server.on('timeout', (socket: Socket) => {
    if ((connections.get(socket)?.inFlight ?? 0) === 0) socket.destroy();
  });

  // accept() failing (EMFILE when something else took the descriptors) is emitted as a server error;
  // without a listener that would crash the process. libuv already sheds the pending connection.
  server.on('error', (err: NodeJS.ErrnoException) => {
    lastAcceptError = err.code ?? err.message;
    note('acceptErrors');
  });

  function firstIdle(): Socket | undefined {
    for (const [socket, state] of connections) if (state.inFlight === 0) return socket;
    return undefined;
  }

  return {
    get open() {
      return connections.size;
    },
  };
}
