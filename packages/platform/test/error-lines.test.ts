import { describe, expect, it } from 'vitest';
import { errorLineTracker, errorOfLine, parseErrorLine } from '../src/util/error-lines.js';

// The console lines a Worker without an SDK writes for its errors Tail Worker (error-tail.ts).

describe('error lines', () => {
  it('carry an error with its tags and cause chain, its parameters redacted, back to an Error', () => {
    const lines: string[] = [];
    const tracker = errorLineTracker((line) => lines.push(line));
    const cause = Object.assign(new Error('permission denied for table invoice_pushes'), {
      name: 'NeonDbError',
    });
    tracker.capture(new Error('Failed query: UPDATE x SET y = $1\nparams: secret-token,42', { cause }), {
      tick: 'push-invoices',
    });
    const line = parseErrorLine(lines[0]);
    expect(line).toMatchObject({ error_report: 'exception', tags: { tick: 'push-invoices' } });
    if (line?.error_report !== 'exception') throw new Error('not an exception line');
    expect(lines[0]).not.toContain('secret-token');
    const err = errorOfLine(line.error);
    expect(err.message).toContain('params: [redacted]');
    expect(err.cause).toBeInstanceOf(Error);
    expect((err.cause as Error).name).toBe('NeonDbError');
    expect((err.cause as Error).message).toBe('permission denied for table invoice_pushes');
  });

  it('give a run one check-in id, which its ok closes', () => {
    const lines: string[] = [];
    const tracker = errorLineTracker((line) => lines.push(line));
    const id = tracker.checkIn?.({ monitorSlug: 'push-invoices', status: 'in_progress' });
    tracker.checkIn?.({ monitorSlug: 'push-invoices', status: 'ok', checkInId: id, duration: 1 });
    expect(id).toMatch(/^[0-9a-f]{32}$/);
    const [start, end] = lines.map(parseErrorLine);
    expect(start).toMatchObject({
      error_report: 'check_in',
      checkIn: { status: 'in_progress', checkInId: id },
    });
    expect(end).toMatchObject({ error_report: 'check_in', checkIn: { status: 'ok', checkInId: id } });
  });

  it('leave every other console line alone', () => {
    for (const arg of [
      '{"level":"error","msg":"tick crashed"}',
      '{"error_report":"something else"}',
      'error_report but not JSON',
      42,
      undefined,
    ]) {
      expect(parseErrorLine(arg)).toBeUndefined();
    }
  });
});
