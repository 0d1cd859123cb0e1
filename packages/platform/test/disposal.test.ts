// A disposal's cause is a value: logs get the sentence they always had, metrics the label they always
// had, each read from the value (no parsing back). Pure: no database.

import type { Labels, MetricsRegistry } from '@honest-health/platform';
import { describe, expect, it } from 'vitest';
import { type DisposalCause, describeDisposal, describeWork, PROBE_READ_ONLY } from '../src/db/disposal.js';
import { platformMetrics } from '../src/metrics/platform-metrics.js';

// Records what the platform counts, by metric name and label set.
function recordingRegistry() {
  const counts = new Map<string, number>();
  const key = (name: string, labels: Labels) => `${name} ${JSON.stringify(labels)}`;
  const registry: MetricsRegistry = {
    counter: ({ name }) => ({
      inc: (labels, value = 1) =>
        void counts.set(key(name, labels), (counts.get(key(name, labels)) ?? 0) + value),
    }),
    histogram: () => ({ observe: () => {} }),
    gauge: () => {},
    render: async () => '',
  };
  return { registry, count: (name: string, labels: Labels) => counts.get(key(name, labels)) };
}

const CASES: Array<[DisposalCause, string, string]> = [
  [PROBE_READ_ONLY, 'probe read_only', 'probe_read_only'],
  [{ source: 'request', reason: '25006' }, 'poison in request: 25006', 'request_poison'],
  [
    { source: 'tick', name: 'push-invoices', reason: '57P01' },
    'poison in tick push-invoices: 57P01',
    'tick_poison',
  ],
  [
    { source: 'background', name: 'api-key registry refresh', reason: 'ECONNREFUSED' },
    'poison in api-key registry refresh: ECONNREFUSED',
    'background_poison',
  ],
];

describe('disposal causes', () => {
  it.each(CASES)('%o is logged as "%s" and counted under cause=%s', (cause, sentence, label) => {
    expect(describeDisposal(cause)).toBe(sentence);
    const { registry, count } = recordingRegistry();
    const metrics = platformMetrics(registry, 'honest_health');
    const name = 'honest_health_db_pool_disposals_total';
    expect(count(name, { pool: 'app', cause: label })).toBe(0);
    metrics.disposal('app', cause);
    expect(count(name, { pool: 'app', cause: label })).toBe(1);
    expect(count(name, { pool: 'probe', cause: label })).toBe(0);
    expect(count(name, { pool: 'app', cause: 'other' })).toBe(0);
  });

  it('names the work that met poison as the log lines always did', () => {
    expect(describeWork({ source: 'request' })).toBe('request');
    expect(describeWork({ source: 'tick', name: 'refresh-tokens' })).toBe('tick refresh-tokens');
    expect(describeWork({ source: 'background', name: 'api-key registry refresh' })).toBe(
      'api-key registry refresh',
    );
  });
});
