// Worker scripts for the queue benchmark run as child processes (`node --import tsx <script>`) with an
// IPC channel. A child sets up, says `ready`, then serves runs: each `go` (with the run's parameters)
// ends with one `done`; `exit` ends the process. Children stay alive between runs so that the parent
// can sample their CPU time and no run pays for a process start.
import { type ChildProcess, spawn } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cpuSeconds } from './cpu.js';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

export interface Message {
  type: string;
  [field: string]: unknown;
}

export interface QueueChild {
  readonly name: string;
  readonly child: ChildProcess;
  /** Takes the next message of this type (in arrival order); fails on an `error` message or an exit. */
  next(type: string, timeoutMs?: number): Promise<Message>;
  send(message: Message): void;
  /** CPU seconds this process has used so far (undefined without /proc or once it is gone). */
  cpu(): number | undefined;
  /** Sends `exit`, then SIGTERM, then SIGKILL; resolves once the process has exited. */
  stop(): Promise<void>;
}

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

export function spawnQueueChild(name: string, script: string, config: Record<string, unknown>): QueueChild {
  const child = spawn(process.execPath, ['--import', 'tsx', resolve(repoRoot, script)], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH, QUEUE_CHILD_CONFIG: JSON.stringify(config) },
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  live.add(child);
  const chunks: string[] = [];
  const keep = (chunk: Buffer) => {
    chunks.push(chunk.toString('utf8'));
    if (chunks.length > 100) chunks.splice(0, chunks.length - 100);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const inbox: Message[] = [];
  const waiters = new Set<() => void>();
  let gone = false;
  const wake = () => {
    for (const w of [...waiters]) w();
  };
  const exited = new Promise<void>((done) =>
    child.on('exit', () => {
      live.delete(child);
      gone = true;
      wake();
      done();
    }),
  );
  child.on('message', (message) => {
    inbox.push(message as Message);
    wake();
  });
  const output = () => chunks.join('').slice(-3000);

  return {
    name,
    child,
    next: (type, timeoutMs = 60_000) =>
      new Promise<Message>((done, fail) => {
        const check = () => {
          const error = inbox.find((m) => m.type === 'error');
          if (error) return finish(() => fail(new Error(`${name}: ${String(error.message)}\n${output()}`)));
          const at = inbox.findIndex((m) => m.type === type);
          if (at !== -1) {
            const [hit] = inbox.splice(at, 1);
            return finish(() => done(hit as Message));
          }
          if (gone) finish(() => fail(new Error(`${name} exited before '${type}':\n${output()}`)));
        };
        const timer = setTimeout(
          () => finish(() => fail(new Error(`${name}: no '${type}' in ${timeoutMs} ms:\n${output()}`))),
          timeoutMs,
        );
        const finish = (settle: () => void) => {
          clearTimeout(timer);
          waiters.delete(check);
          settle();
        };
        waiters.add(check);
        check();
      }),
    send(message) {
      if (!gone && child.connected) child.send(message);
    },
    cpu: () => (gone ? undefined : cpuSeconds(child.pid)),
    async stop() {
      if (gone) return;
      if (child.connected) child.send({ type: 'exit' });
      const term = setTimeout(() => child.kill('SIGTERM'), 5000);
      const kill = setTimeout(() => child.kill('SIGKILL'), 10_000);
      await exited;
      clearTimeout(term);
      clearTimeout(kill);
    },
  };
}

// --- the child's side ---------------------------------------------------------------------------------

/** The configuration the parent passed. */
export function childConfig<T>(): T {
  const raw = process.env.QUEUE_CHILD_CONFIG;
  if (!raw) throw new Error('QUEUE_CHILD_CONFIG is not set: run this through bench/queue.ts');
  return JSON.parse(raw) as T;
}

export function report(message: Message): void {
  process.send?.(message);
}

const childInbox: Message[] = [];
const childWaiters = new Set<() => void>();
if (process.env.QUEUE_CHILD_CONFIG && process.send) {
  process.on('message', (message) => {
    childInbox.push(message as Message);
    for (const w of [...childWaiters]) w();
  });
  // The parent is gone: nobody will ever say `exit`.
  process.on('disconnect', () => process.exit(1));
}

/** The next message from the parent whose type is one of `types`. */
export function fromParent(...types: string[]): Promise<Message> {
  return new Promise((done) => {
    const check = () => {
      const at = childInbox.findIndex((m) => types.includes(m.type));
      if (at === -1) return;
      childWaiters.delete(check);
      done(childInbox.splice(at, 1)[0] as Message);
    };
    childWaiters.add(check);
    check();
  });
}

/** Runs the child: `setup` once, then `run` for every `go` until `exit`; any failure is reported. */
export async function serve<S>(
  setup: () => Promise<S>,
  run: (state: S, go: Message) => Promise<Record<string, unknown>>,
  teardown: (state: S) => Promise<void>,
): Promise<void> {
  try {
    const state = await setup();
    report({ type: 'ready' });
    for (;;) {
      const message = await fromParent('go', 'exit');
      if (message.type === 'exit') break;
      report({ type: 'done', ...(await run(state, message)) });
    }
    await teardown(state);
    process.exit(0);
  } catch (err) {
    report({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) });
    process.exit(1);
  }
}
