// A fetch() over the sandbox app without a socket, for tests that want no server: a 'drop' fault
// surfaces as the same TypeError('fetch failed') a real network error gives.
import { isDropped } from './faults.js';

export type FetchLike = (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>;

export const IN_PROCESS_ORIGIN = 'http://xero-sandbox.invalid';

export function inProcessFetch(app: {
  fetch: (request: Request) => Response | Promise<Response>;
}): FetchLike {
  return async (input, init) => {
    const url = typeof input === 'string' && input.startsWith('/') ? `${IN_PROCESS_ORIGIN}${input}` : input;
    const response = await app.fetch(new Request(url, init));
    if (isDropped(response)) {
      await response.body?.cancel();
      throw new TypeError('fetch failed', {
        cause: new Error('xero-sandbox: response dropped (injected fault)'),
      });
    }
    return response;
  };
}
