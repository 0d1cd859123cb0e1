import { closeSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';

// PGlite is one Postgres inside one process. A second process that opens the same data directory
// gets its own copy of the database in memory, and whatever it writes is lost or overwrites the
// first one's pages (`npm run org:create` printed a key the running server never saw). So every
// opener takes this lock first: a file in the data directory holding the owner's pid, created with
// O_EXCL. A lock whose pid is gone (a crash, kill -9) is taken over. Its name is the app's
// (util/identity.ts): a server and the app's own tools must agree on it.

/**
 */
export class DatabaseLockedError extends Error {
  override name = 'DatabaseLockedError';
  constructor(
    readonly dataDir: string,
    readonly pid: number,
    readonly command: string,
  ) {
    super(
      `the embedded database ${dataDir} is in use by process ${pid} (${command}): stop it first, or run ` +
        'the server and this command on one Postgres with DATABASE_URL',
    );
  }
}

interface LockOwner {
  pid: number;
  command: string;
}

/** Takes the lock (the file `lockFile`) on `dataDir` for this process; returns the release function. */
export function lockDataDir(dataDir: string, lockFile: string, command = describeProcess()): () => void {
  const path = join(dataDir, lockFile);
  const mine: LockOwner = { pid: process.pid, command };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      try {
        writeSync(fd, `${JSON.stringify(mine)}\n`);
      } finally {
        closeSync(fd);
      }
      return () => {
        // Only our own lock: a takeover after we were presumed dead must not be undone by us.
        if (readOwner(path)?.pid === process.pid) rmSync(path, { force: true });
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = readOwner(path);
    // One process can hold it again (bun --hot re-evaluates the entry in the same process).
    if (owner && owner.pid !== process.pid && isAlive(owner.pid)) {
      throw new DatabaseLockedError(dataDir, owner.pid, owner.command);
    }
    // Stale (its process is gone), half written, or ours: replace it.
    rmSync(path, { force: true });
  }
  throw new Error(`could not take the lock ${path}`);
}

function readOwner(path: string): LockOwner | undefined {
  try {
    const owner = JSON.parse(readFileSync(path, 'utf8')) as Partial<LockOwner>;
    return typeof owner.pid === 'number' && Number.isSafeInteger(owner.pid) && owner.pid > 0
      ? { pid: owner.pid, command: typeof owner.command === 'string' ? owner.command : 'unknown' }
      : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, owned by another user.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** "npm start", "node dist/node.js", "tsx scripts/seed.ts": what the operator would recognise. */
function describeProcess(): string {
  const script = process.env.npm_lifecycle_event;
  if (script) return script === 'start' ? 'npm start' : `npm run ${script}`;
  return process.argv
    .slice(1, 3)
    .map((a) => a.replace(/^.*\/(?=(dist|cli|dev|tools|src)\/)/, ''))
    .join(' ');
}
