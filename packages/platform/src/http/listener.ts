import type { Logger } from '../util/log.js';
import type { HttpConfig } from './config.js';

// The contract between the process lifecycle and a runtime's HTTP server (platform/runtimes/*-listener.ts).

/** What the runtime knows of the connection a request came on. */
export interface ConnectionInfo {
  /** The peer's address (the socket's), when the runtime has one. */
  remoteAddress?: string | undefined;
}

export type FetchHandler = (request: Request, connection?: ConnectionInfo) => Response | Promise<Response>;

/** What a runtime's HTTP server must offer once bound: its port, and a drain. */
export interface Listener {
  port: number;
  /** Stop accepting, let in-flight requests finish within the budget, then close every socket. */
  close(budgetMs: number): Promise<void>;
}

export interface ListenOptions {
  port: number;
  host: string;
  http: HttpConfig;
  /** The Host a request without one (HTTP/1.0) is taken to be for. */
  defaultHost: string;
  log: Logger;
}

/** Binds; resolves once listening. */
export type Listen = (fetch: FetchHandler, options: ListenOptions) => Promise<Listener>;

/** A request without a Host header (HTTP/1.0 health checkers) is for this host. */
export const DEFAULT_HOST = 'localhost';
