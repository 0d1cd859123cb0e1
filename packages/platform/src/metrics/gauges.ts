import type { GaugeRegistry, GaugeSample } from './registry.js';

// Workers: gauges only, read at scrape time, in the Prometheus text format 0.0.4. prom-client does not
// run there, and a counter in an isolate that lives for a few requests says little.

export function createGaugeRegistry(onCollectError: (metric: string, err: unknown) => void): GaugeRegistry {
  const gauges: { name: string; help: string; collect: () => Promise<GaugeSample[]> }[] = [];
  return {
    gauge: ({ name, help }, collect) => {
      gauges.push({ name, help, collect: async () => collect() });
    },
    async render() {
      const blocks = await Promise.all(
        gauges.map(async ({ name, help, collect }) => {
          const samples = await collect().catch((err: unknown) => {
            onCollectError(name, err);
            return [];
          });
          const lines = samples.map((s) => `${name}${labelSet(s.labels)} ${number(s.value)}`);
          return [
            `# HELP ${name} ${help.replace(/\\/g, '\\\\').replace(/\n/g, '\\n')}`,
            `# TYPE ${name} gauge`,
            ...lines,
          ];
        }),
      );
      return `${blocks.flat().join('\n')}\n`;
    },
  };
}

function labelSet(labels: Record<string, string>): string {
  const pairs = Object.entries(labels).map(
    ([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"')}"`,
  );
  return pairs.length ? `{${pairs.join(',')}}` : '';
}

function number(n: number): string {
  if (Number.isNaN(n)) return 'NaN';
  if (!Number.isFinite(n)) return n > 0 ? '+Inf' : '-Inf';
  return String(n);
}
