// The Workers gauge exposition (packages/platform/src/metrics/gauges.ts) and the strict Prometheus text parser
// the metrics tests read /metrics with. Pure: text in, text out.

import { createGaugeRegistry } from '@honest-health/platform/internal/metrics/gauges';
import { describe, expect, it } from 'vitest';
import { parsePrometheus, sample } from '../support/prometheus.js';

describe('the Workers gauge exposition', () => {
  it('writes valid Prometheus text, escaping label values, and leaves a failed gauge empty', async () => {
    const failures: string[] = [];
    const registry = createGaugeRegistry((metric) => failures.push(metric));
    registry.gauge(
      { name: 'demo_state', help: 'A help text with a \\ and a\nnewline', labelNames: ['path'] },
      () => [
        { labels: { path: 'C:\\DIR\\"FILE"\n' }, value: 1 },
        { labels: { path: 'plain' }, value: 0.25 },
      ],
    );
    registry.gauge({ name: 'demo_special', help: 'Special values', labelNames: [] }, async () => [
      { labels: {}, value: Number.POSITIVE_INFINITY },
    ]);
    registry.gauge({ name: 'demo_failing', help: 'Its collector throws', labelNames: [] }, () => {
      throw new Error('database away');
    });
    const families = parsePrometheus(await registry.render());
    expect(families.find((f) => f.name === 'demo_state')).toMatchObject({
      type: 'GAUGE',
      metrics: [
        { labels: { path: 'C:\\DIR\\"FILE"\n' }, value: '1' },
        { labels: { path: 'plain' }, value: '0.25' },
      ],
    });
    expect(sample(families, 'demo_special')).toBe(Number.POSITIVE_INFINITY);
    expect(families.find((f) => f.name === 'demo_failing')?.metrics ?? []).toEqual([]);
    expect(failures).toEqual(['demo_failing']);
  });

  it('is checked by a parser that really rejects bad text', () => {
    expect(() => parsePrometheus('demo_value{a="unterminated} 1\n')).toThrow(/not a sample/);
    expect(() => parsePrometheus('demo_untyped 1\n')).toThrow(/no TYPE line/);
  });
});
