import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../util/log.js';

// Node's HTTP server keeps every connection a client opens until the client closes it. This guard
// (1) closes a connection that sits idle (no request in flight, no byte either way) for the idle
// timeout, and (2) keeps the number of open connections under a cap: at the cap a new connection
// closes the oldest idle one, so a probe still gets in while idle sockets pile up; only when every
// connection has a request in flight is the new one refused. Both are logged, at most one line per
// LOG_WINDOW_MS with counts. It costs nothing per request (liveness is answered thousands of times a
// second): the work is per connection, and idleness is only looked up when a decision is due.
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
  // Insertion order is connection order: the first idle entry is the oldest idle connection.
  const connections = new Set<Socket>();
  // Requests in flight per connection, from the server's public events: 'request' once a request's
  // headers are in, the response's 'close' once it is done or the connection died. Pipelined requests
  // count each; a socket with none in flight is idle.
  const inFlight = new WeakMap<Socket, number>();
  const isIdle = (socket: Socket) => !inFlight.get(socket);
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const socket = req.socket;
    inFlight.set(socket, (inFlight.get(socket) ?? 0) + 1);
    res.once('close', () => inFlight.set(socket, (inFlight.get(socket) ?? 1) - 1));
  });

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
    connections.add(socket);
    socket.once('close', () => connections.delete(socket));
  });

  // The socket timeout fires after idleTimeoutMs without a byte either way. With a listener here Node
  // leaves the socket to us (http/server.js socketOnTimeout): close it only when no request is in
  // flight, so a slow but legitimate answer (a readiness probe bounded by PROBE_TIMEOUT_MS) is not cut.
  server.setTimeout(options.idleTimeoutMs);
  server.on('timeout', (socket: Socket) => {
    if (isIdle(socket)) socket.destroy();
  });

  // accept() failing (EMFILE when something else took the descriptors) is emitted as a server error;
  // without a listener that would crash the process. libuv already sheds the pending connection.
  server.on('error', (err: NodeJS.ErrnoException) => {
    lastAcceptError = err.code ?? err.message;
    note('acceptErrors');
  });

  function firstIdle(): Socket | undefined {
    for (const socket of connections) if (isIdle(socket)) return socket;
    return undefined;
  }

  return {
    get open() {
      return connections.size;
    },
  };
}
