// How one delivery goes over the wire. Two senders: `fetchSender` (web-standard, for Workers, which
// cannot resolve names: Cloudflare's fetch reaches only public addresses), and on Node and Bun
// `pinnedSender` (pinned-send.ts), which checks every address a name resolves to and connects to a
// checked one. Both follow no redirects, time out, and read at most a capped answer.

import type { Resolver } from './ssrf.js';

export interface SendRequest {
  headers: Record<string, string>;
  body: string;
  timeoutMs: number;
  maxResponseBytes: number;
  /** WEBHOOK_ALLOW_INSECURE: loopback addresses let through. */
  allowLoopback: boolean;
}

/** Sends one POST; resolves with the answer's status. */
export type Sender = (url: URL, request: SendRequest) => Promise<number>;

/** How webhooks reach the network on Node and Bun: names resolved, and sends pinned to checked addresses. */
export interface WebhookNet {
  resolve: Resolver;
  send: Sender;
}

export const fetchSender: Sender = async (url, r) => {
  const res = await fetch(url, {
    method: 'POST',
    headers: r.headers,
    body: r.body,
    redirect: 'manual',
    signal: AbortSignal.timeout(r.timeoutMs),
  });
  await drain(res, r.maxResponseBytes);
  return res.status;
};

/** Reads at most `cap` bytes of the answer, then drops the rest: a receiver cannot make us buffer more. */
async function drain(res: Response, cap: number): Promise<void> {
  const reader = res.body?.getReader();
  if (!reader) return;
  let read = 0;
  try {
    while (read <= cap) {
      const { done, value } = await reader.read();
      if (done) return;
      read += value.byteLength;
    }
    await reader.cancel();
  } catch {
    // The body is not needed; only the status is.
  }
}
