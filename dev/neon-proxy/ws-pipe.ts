// The WebSocket side of the Neon driver (`Pool`/`Client`): every binary message is raw Postgres
// wire protocol, so each WebSocket is piped byte for byte to a fresh TCP connection to the
// configured upstream. The client never chooses the destination.
import type { IncomingMessage } from 'node:http';
import { connect, type Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { type RawData, type WebSocket, WebSocketServer } from 'ws';

export interface WsPipeOptions {
  upstreamHost: string;
  upstreamPort: number;
}

export interface WsPipeStats {
  /** Pipes whose WebSocket is still open. */
  open: number;
  /** Pipes ever opened. */
  total: number;
  /** Pipes that ended because of an error on either side. */
  errors: number;
}

// Stop reading from Postgres while this much is queued on a slow WebSocket; resume below LOW.
const HIGH_WATER = 4 * 1024 * 1024;
const LOW_WATER = 1024 * 1024;

/**
 * A Postgres ErrorResponse message ('E'). Sent when the upstream cannot be reached, so the driver
 * reports a real database error (SQLSTATE 08006) instead of "Connection terminated unexpectedly".
 */
export function errorResponseMessage(code: string, message: string): Buffer {
  const fields = Buffer.concat([
    ...[
      ['S', 'FATAL'],
      ['V', 'FATAL'],
      ['C', code],
      ['M', message],
    ].map(([type, value]) => Buffer.from(`${type}${value}\0`, 'utf8')),
    Buffer.from([0]),
  ]);
  const header = Buffer.alloc(5);
  header.write('E', 0, 'latin1');
  header.writeInt32BE(fields.length + 4, 1);
  return Buffer.concat([header, fields]);
}

function toBuffer(data: RawData): Buffer {
  if (Buffer.isBuffer(data)) return data;
  if (Array.isArray(data)) return Buffer.concat(data);
  return Buffer.from(data);
}

export class WsPipes {
  private readonly server = new WebSocketServer({ noServer: true, clientTracking: false });
  private readonly live = new Set<{ ws: WebSocket; tcp: Socket }>();
  private readonly counters: WsPipeStats = { open: 0, total: 0, errors: 0 };

  constructor(private readonly options: WsPipeOptions) {}

  stats(): WsPipeStats {
    return { ...this.counters, open: this.live.size };
  }

  /** Completes the WebSocket handshake on an already-vetted `upgrade` request and starts a pipe. */
  handleUpgrade(request: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.server.handleUpgrade(request, socket, head, (ws) => this.pipe(ws));
  }

  /** Terminates every pipe (both sides). */
  closeAll(): void {
    for (const { ws, tcp } of this.live) {
      ws.terminate();
      tcp.destroy();
    }
    this.server.close();
  }

  private pipe(ws: WebSocket): void {
    const { upstreamHost, upstreamPort } = this.options;
    const tcp = connect({ host: upstreamHost, port: upstreamPort });
    tcp.setNoDelay(true);
    const entry = { ws, tcp };
    this.live.add(entry);
    this.counters.total++;
    let upstreamSpoke = false;
    let failed = false;
    let done = false;

    const finish = (error?: Error) => {
      if (error !== undefined && !failed) {
        failed = true;
        this.counters.errors++;
      }
      if (done) return;
      done = true;
      this.live.delete(entry);
    };

    // Client → Postgres. Writes made before the TCP connection is up are buffered by the socket.
    ws.on('message', (data, isBinary) => {
      if (!isBinary) {
        ws.close(1003, 'only binary messages (Postgres wire protocol) are accepted');
        return;
      }
      if (tcp.destroyed) return;
      if (!tcp.write(toBuffer(data))) ws.pause();
    });
    tcp.on('drain', () => ws.resume());

    // Postgres → client, pausing the upstream while the WebSocket is backed up.
    tcp.on('data', (chunk) => {
      upstreamSpoke = true;
      ws.send(chunk, { binary: true }, () => {
        if (tcp.isPaused() && ws.bufferedAmount < LOW_WATER) tcp.resume();
      });
      if (ws.bufferedAmount > HIGH_WATER) tcp.pause();
    });

    tcp.on('error', (error: NodeJS.ErrnoException) => {
      finish(error);
      // A write that met the dying socket may have paused the WebSocket for backpressure: 'drain'
      // never comes, and a paused WebSocket never completes its close handshake.
      ws.resume();
      if (ws.readyState !== ws.OPEN) return;
      if (!upstreamSpoke) {
        // Nothing has reached the client yet: it is waiting for the reply to its startup packet.
        const message = `neon local proxy: cannot reach the upstream database at ${upstreamHost}:${upstreamPort} (${error.code ?? error.message})`;
        ws.send(errorResponseMessage('08006', message), { binary: true }, () =>
          ws.close(1011, 'upstream error'),
        );
      } else {
        ws.close(1011, 'upstream error');
      }
    });
    tcp.on('close', () => {
      // Postgres hung up (after a Terminate, or on shutdown): let what is queued go out, then close.
      if (!failed && ws.readyState === ws.OPEN) ws.close(1000);
    });

    ws.on('error', (error) => {
      finish(error);
      tcp.destroy();
      ws.terminate();
    });
    ws.on('close', () => {
      finish();
      // A FIN rather than a reset: Postgres ends the backend cleanly on EOF.
      tcp.end();
      tcp.setTimeout(5_000, () => tcp.destroy());
    });
  }
}
