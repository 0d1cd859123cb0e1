// The Worker's own log lines (JSON on workerd's stdout), for tests that count what an isolate did.

/** Miniflare options that hand each JSON line the Worker writes to `onLine`; none without it. */
export function workerJsonLines(onLine?: (line: Record<string, unknown>) => void) {
  if (!onLine) return {};
  return {
    handleRuntimeStdio: (stdout: NodeJS.ReadableStream) => {
      let rest = '';
      stdout.on('data', (chunk: Buffer) => {
        const lines = (rest + chunk.toString('utf8')).split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) {
          if (line.startsWith('{')) onLine(JSON.parse(line) as Record<string, unknown>);
        }
      });
    },
  };
}
