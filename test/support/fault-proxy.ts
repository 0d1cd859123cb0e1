// A TCP proxy that can reset, black-hole and re-point connections, to stage network faults in tests.
import { createConnection, createServer, type Socket } from 'node:net';

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

interface Link {
  client: Socket;
  upstream: Socket | undefined;
  blackholed: boolean;
}

// Relays a chunk, pausing the source while the destination's buffer is full.
function relay(chunk: Buffer, from: Socket, to: Socket): void {
  if (!to.write(chunk)) {
    from.pause();
    to.once('drain', () => from.resume());
  }
}

export async function startFaultProxy(targetPort: number, targetHost = '127.0.0.1'): Promise<FaultProxy> {
  let target = { port: targetPort, host: targetHost };
  let holeOn = false;
  const links = new Set<Link>();

  const kill = (link: Link, reset: boolean) => {
    links.delete(link);
    if (reset && !link.client.destroyed) link.client.resetAndDestroy();
    else link.client.destroy();
    link.upstream?.destroy();
  };

  const server = createServer((client) => {
    const link: Link = { client, upstream: undefined, blackholed: holeOn };
    links.add(link);
    client.setNoDelay(true);
    client.on('error', () => kill(link, false));
    client.on('close', () => kill(link, false));
    client.on('data', (chunk: Buffer) => {
      if (!link.blackholed && link.upstream) relay(chunk, client, link.upstream);
    });
    if (link.blackholed) return; // accepted, swallowed, never dialled

    // Pinned: the target is read once, here. Writes before 'connect' are queued by node.
    const upstream = createConnection(target);
    link.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on('data', (chunk: Buffer) => {
      if (!link.blackholed) relay(chunk, upstream, client);
    });
    upstream.on('error', () => {}); // handled by 'close' below
    upstream.on('close', (hadError) => {
      if (link.blackholed || !links.has(link)) return; // a partition hides the server going away
      if (hadError) kill(link, true);
      else {
        links.delete(link);
        client.end(); // server closed cleanly: pass the FIN on
      }
    });
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: 0, host: '127.0.0.1' }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('fault proxy has no TCP address');

  return {
    port: address.port,
    setTarget(port, host = target.host) {
      target = { port, host };
    },
    dropAll() {
      for (const link of [...links]) kill(link, true);
    },
    blackhole(on) {
      holeOn = on;
      for (const link of [...links]) {
        if (on) link.blackholed = true;
        else if (link.blackholed) kill(link, true);
      }
    },
    connectionCount: () => links.size,
    close() {
      for (const link of [...links]) kill(link, false);
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
