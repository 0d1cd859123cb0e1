// What a benchmark prints: progress on stderr (so stdout holds only the results), tables, the closing
// JSON and `result:` lines, and the knobs it reads.
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

/** A figure of the `result:` line: a number, or null when the run could not measure it. */
export type ResultFigure = number | null | undefined;

const RESULT_NAME = /^[a-z][a-z0-9_]*$/;

/**
 * How every benchmark ends: all its figures as one JSON object (for the record), then one line
 * `result: name=value name=value ...` with the figures its targets are read from, under names that stay
 * the same from run to run (scripts grep for them). Ratios are decimals; values are rounded to 3
 * decimals; a figure the run could not measure (null, NaN, Infinity) prints as `nan`, which
 * `Number()`, `parseFloat` and Python's `float()` all read as NaN.
 */
export function printResults(
  bench: string,
  figures: Record<string, unknown>,
  result: Record<string, ResultFigure>,
): void {
  const fields = Object.entries(result).map(([name, value]) => {
    if (!RESULT_NAME.test(name)) throw new Error(`result name "${name}" must match ${RESULT_NAME}`);
    const shown =
      typeof value === 'number' && Number.isFinite(value) ? String(Math.round(value * 1000) / 1000) : 'nan';
    return `${name}=${shown}`;
  });
  console.log('');
  console.log(JSON.stringify({ bench, node: process.version, cores: availableParallelism(), ...figures }));
  console.log(`result: ${fields.join(' ')}`);
}

/** A positive integer knob from the environment (BENCH_*), or its default. */
export function intEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1) throw new Error(`${name} must be a positive integer`);
  return n;
}
