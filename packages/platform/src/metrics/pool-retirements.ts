// node-postgres' pool (and the Neon WebSocket driver's port of it) retires a connection that reached
// maxLifetimeSeconds without any event of its own; its only trace is this debug line through the pool's
// `log` function, which we wrap. test/metrics.test.ts fails if a driver upgrade changes the line.
const RETIRED = 'ending client due to expired lifetime';

export function countRetirements(client: unknown, onRetired: () => void): void {
  const pool = client as { log?: (...args: unknown[]) => void } | null;
  if (!pool || typeof pool.log !== 'function') return;
  const log = pool.log;
  pool.log = function (this: unknown, ...args: unknown[]) {
    if (args[0] === RETIRED) onRetired();
    return log.apply(this, args);
  };
}
