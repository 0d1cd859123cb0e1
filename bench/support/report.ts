// What a benchmark prints: progress on stderr (so stdout holds only the results), tables, the closing
// JSON line, and the knobs it reads.
import { availableParallelism } from 'node:os';

export const progress = (msg: string) => console.error(`# ${msg}`);

/** Columns padded to their widest cell, two spaces apart; the first row is the header. */
export function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, col) => Math.max(...rows.map((r) => (r[col] ?? '').length))) ?? [];
  return rows
    .map((r) =>
      r
        .map((cell, col) => cell.padEnd(widths[col] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export const verdict = (ok: boolean) => (ok ? 'ok' : 'MISSED');

/** The names of the checks that failed. */
export const missedChecks = (checks: Record<string, boolean>): string[] =>
  Object.entries(checks)
    .filter(([, ok]) => !ok)
    .map(([name]) => name);

/** The last line of every benchmark: all its figures as one JSON object, for the record. */
export function printJsonLine(bench: string, figures: Record<string, unknown>): void {
  console.log('');
  console.log(JSON.stringify({ bench, node: process.version, cores: availableParallelism(), ...figures }));
}

/** A positive integer knob from the environment (BENCH_*), or its default. */
export function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}
