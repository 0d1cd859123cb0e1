// Tick health's pure parts: the judgement over recorded runs, the error code a run records, and the
// settings. The same describe in test/tick-health.test.ts keeps what needs Postgres and sockets.

import { heartbeatUrlFor, redactHeartbeatUrl } from '@honest-health/platform/internal/jobs/heartbeats';
import { evaluateTickHealth } from '@honest-health/platform/internal/jobs/tick-health';
import { loadTickHealthConfig } from '@honest-health/platform/internal/jobs/tick-health-config';
import { tickErrorCode } from '@honest-health/platform/internal/jobs/tick-health-store';
import { describe, expect, it } from 'vitest';
import { HEARTBEAT_TEST_KEY } from '../support/heartbeat-sink.js';

describe('tick health, in process', () => {
  it('judges ticks: pending while the process is young, failing per instance, stale instances ignored', () => {
    const now = Date.parse('2026-12-01T10:00:00Z');
    const ticks = [{ name: 'push', intervalMs: 60_000 }];
    const policy = { intervals: 3, failures: 2 };
    const row = (instanceId: string, agoMs: number, failures: number, successAgoMs: number | null) => ({
      tick: 'push',
      instanceId,
      startedMs: now - agoMs,
      finishedMs: now - agoMs,
      successMs: successAgoMs === null ? null : now - successAgoMs,
      failureMs: failures > 0 ? now - agoMs : null,
      consecutiveFailures: failures,
      lastErrorCode: failures > 0 ? '42501' : null,
    });
    const judge = (rows: ReturnType<typeof row>[], startedAtMs?: number) =>
      evaluateTickHealth({ nowMs: now, rows }, ticks, { ...policy, ...(startedAtMs ? { startedAtMs } : {}) })
        .ticks.push;
    expect(judge([], now - 60_000)?.status).toBe('pending');
    expect(judge([], now - 200_000)?.status).toBe('overdue');
    expect(judge([])?.status).toBe('overdue');
    expect(judge([row('a', 30_000, 0, 30_000)])?.status).toBe('ok');
    // One failure is not yet "run after run".
    expect(judge([row('a', 30_000, 1, 90_000)])?.status).toBe('ok');
    expect(judge([row('a', 30_000, 0, 30_000), row('b', 30_000, 2, null)])).toMatchObject({
      status: 'failing',
      failing_instances: ['b'],
      last_error_code: '42501',
    });
    // A replica that failed and then went away (nothing for K intervals) no longer counts.
    expect(judge([row('a', 30_000, 0, 30_000), row('b', 400_000, 5, null)])?.status).toBe('ok');
    // Runs that start but never succeed, on no single instance twice in a row: still overdue.
    expect(judge([row('a', 30_000, 1, 500_000)])?.status).toBe('overdue');
  });

  it('records a code, never a message', () => {
    const drizzleWrapped = new Error('Failed query: update ... params: secret', {
      cause: Object.assign(new Error('permission denied for table invoice_pushes'), { code: '42501' }),
    });
    expect(tickErrorCode(drizzleWrapped)).toBe('42501');
    expect(tickErrorCode(Object.assign(new Error('Xero answered 503'), { status: 503 }))).toBe('503');
    expect(
      tickErrorCode(
        new Error('fetch failed', { cause: Object.assign(new Error('x'), { code: 'ECONNREFUSED' }) }),
      ),
    ).toBe('ECONNREFUSED');
    expect(tickErrorCode(new Error('something with a token in it'))).toBe('error');
  });

  it('validates its settings: a bad K fails boot, a bad heartbeat URL is only a warning naming the variable', () => {
    expect(() =>
      loadTickHealthConfig({ TICK_HEALTH_INTERVALS: '0', TICK_HEALTH_FAILURES: 'x' }, ['push-invoices']),
    ).toThrow(/TICK_HEALTH_INTERVALS .*TICK_HEALTH_FAILURES/);
    const secret = `https//hc-ping.example/${HEARTBEAT_TEST_KEY}`;
    const config = loadTickHealthConfig(
      {
        TICK_HEARTBEAT_URL_PUSH_INVOICES: secret,
        TICK_HEARTBEAT_URL_REFRESH_TOKENS: 'https://hc-ping.example/uuid',
        TICK_HEARTBEAT_URL_PUSH: 'https://hc-ping.example/other',
      },
      ['push-invoices', 'refresh-tokens'],
    );
    expect(config.policy).toEqual({ intervals: 3, failures: 2 });
    expect([...config.heartbeats.keys()]).toEqual(['refresh-tokens']);
    expect(config.warnings).toHaveLength(2);
    expect(config.warnings[0]).toMatch(/^TICK_HEARTBEAT_URL_PUSH_INVOICES /);
    expect(config.warnings[1]).toMatch(/^TICK_HEARTBEAT_URL_PUSH names no enabled tick/);
    expect(config.warnings.join(' ')).not.toContain(HEARTBEAT_TEST_KEY);
    expect(heartbeatUrlFor('https://hc-ping.example/uuid/', 'fail')).toBe(
      'https://hc-ping.example/uuid/fail',
    );
    expect(heartbeatUrlFor('https://hc-ping.example/key/slug?create=1', 'start')).toBe(
      'https://hc-ping.example/key/slug/start?create=1',
    );
    expect(heartbeatUrlFor('https://hc-ping.example/uuid', 'success')).toBe('https://hc-ping.example/uuid');
    expect(redactHeartbeatUrl(`https://hc-ping.example/${HEARTBEAT_TEST_KEY}/x`)).toBe(
      'https://hc-ping.example/[redacted]',
    );
  });
});
