import { createLogger } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';

describe('structured logs', () => {
  const capture = () => {
    const lines: string[] = [];
    return { log: createLogger('debug', { service: 'test' }, (l) => lines.push(l)), lines };
  };

  it('writes one JSON object per line with time, level and message', () => {
    const { log, lines } = capture();
    log.child({ tick: 'push' }).info('hello', { n: 1 });
    log.debug('quiet');
    const [line] = lines.map((l) => JSON.parse(l));
    expect(line).toMatchObject({ level: 'info', msg: 'hello', service: 'test', tick: 'push', n: 1 });
    expect(Date.parse(line.time)).not.toBeNaN();
    expect(lines).toHaveLength(2);
  });

  it('never prints what a driver error carries: client objects, parameters, query params', () => {
    const { log, lines } = capture();
    const event = {
      message: 'socket closed',
      client: { connectionParameters: { password: 'hunter2', host: 'db' } },
    };
    log.warn('idle client failed', { err: event });
    const wrapped = new Error('Failed query: select 1 where k = $1\nparams: tok_s3cr3t', {
      cause: Object.assign(new Error('boom'), { code: '23505' }),
    });
    log.error('request failed', { err: wrapped });
    const text = lines.join('\n');
    expect(text).not.toContain('hunter2');
    expect(text).not.toContain('s3cr3t');
    expect(JSON.parse(lines[1] ?? '{}').err).toMatchObject({ cause: { code: '23505', message: 'boom' } });
  });
});
