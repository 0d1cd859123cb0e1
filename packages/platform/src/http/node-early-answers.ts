import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { DISCARD_MAX_BYTES } from './config.js';

// An answer sent before the request's body was read (a 413 for a declared size over the limit, a 401
// before the body is looked at): the client may still be sending. A socket closed with bytes unread
// makes the kernel answer them with a reset, and a client that meets the reset before it has read the
// answer never sees it (it reports EPIPE or ECONNRESET). RFC 9112 section 9.6 calls for a staged
// close for this reason. So the body's rest is read and thrown away, at most DISCARD_MAX_BYTES (past
// that the client is cut: it ignores the answer) and within HTTP_REQUEST_TIMEOUT_MS, which Node still
// runs for the unfinished request; then an answer that said `Connection: close` closes.
// @hono/node-server's own clean-up (autoCleanupIncoming, turned off in node-listener.ts) destroys the
// socket 500 ms after the answer, which a slow uplink or a loaded machine outlasts.

export function drainEarlyAnswers(server: Server, maxBytes = DISCARD_MAX_BYTES): void {
  // Before @hono/node-server's listener, which may answer synchronously.
  server.prependListener('request', (req: IncomingMessage, res: ServerResponse) => {
    // Most requests have no body: nothing to watch.
    if (req.headers['content-length'] === undefined && req.headers['transfer-encoding'] === undefined) return;
    // 'prefinish' comes before Node's own 'finish' handler, which closes a `Connection: close` answer.
    res.once('prefinish', () => {
      // Only a body nobody began: one the app read and gave up on (a chunked body past the limit,
      // its reader cancelled) has stopped its socket's reading, and closes as Node closes it.
      if (!req.complete && !req.readableDidRead) discardTheRest(req, maxBytes);
    });
  });
}

function discardTheRest(req: IncomingMessage, maxBytes: number): void {
  const socket = req.socket;
  // Node ends a `Connection: close` answer with socket.destroySoon(): hold that until the body is in.
  const destroySoon = socket.destroySoon;
  socket.destroySoon = () => {
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      socket.destroySoon = destroySoon;
      destroySoon.call(socket);
    };
    // A body the app began and gave up on (a chunked one past the limit: the reader cancelled it)
    // cannot be read any further: close now, as before, rather than hold the socket open.
    if (req.complete || req.destroyed) return close();
    req.once('end', close);
    req.once('close', close);
  };
  // Read by us, counted: a request already flowing is not req._dump()ed by Node's 'finish' handler,
  // which would drop the bytes unseen, and so unbounded.
  let discarded = 0;
  req.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > maxBytes) socket.destroy();
  });
  req.resume();
}
