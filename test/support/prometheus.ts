// Reading /metrics the way Prometheus does: every line checked against the text format 0.0.4, then
// parsed with parse-prometheus-text-format (which is lenient on its own: it skips what it cannot read).
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format';

const NAME = '[a-zA-Z_:][a-zA-Z0-9_:]*';
const LABEL_VALUE = '"(?:[^"\\\\\\n]|\\\\[\\\\"n])*"';
const LABELS = `\\{(?:[a-zA-Z_][a-zA-Z0-9_]*=${LABEL_VALUE}(?:,[a-zA-Z_][a-zA-Z0-9_]*=${LABEL_VALUE})*,?)?\\}`;
// Prometheus reads values with Go's ParseFloat, where NaN and Inf are case-insensitive; prom-client
// writes "Nan" for the event-loop-lag mean before its monitor has a sample.
const VALUE =
  '(?:[-+]?(?:\\d+\\.?\\d*(?:[eE][-+]?\\d+)?|\\.\\d+(?:[eE][-+]?\\d+)?)|[-+]?[Ii][Nn][Ff]|[Nn][Aa][Nn])';
const SAMPLE = new RegExp(`^(${NAME})(${LABELS})? ${VALUE}(?: -?\\d+)?$`);
const HELP = new RegExp(`^# HELP (${NAME})(?: .*)?$`);
const TYPE = new RegExp(`^# TYPE (${NAME}) (counter|gauge|histogram|summary|untyped)$`);
const SUFFIXES = ['_bucket', '_sum', '_count', '_created'];

/** Throws on the first line that is not valid Prometheus text (0.0.4); returns the parsed families. */
export function parsePrometheus(text: string): PrometheusFamily[] {
  const typed = new Set<string>();
  for (const [index, line] of text.split('\n').entries()) {
    if (line === '') continue;
    const fail = (why: string) => {
      throw new Error(`line ${index + 1} of the exposition ${why}: ${line}`);
    };
    const type = TYPE.exec(line);
    if (type) {
      typed.add(type[1] as string);
      continue;
    }
    if (line.startsWith('#')) {
      if (line.startsWith('# HELP') && !HELP.test(line)) fail('is a malformed HELP line');
      continue;
    }
    const sample = SAMPLE.exec(line);
    if (!sample) fail('is not a sample');
    const name = sample?.[1] as string;
    const family = SUFFIXES.reduce(
      (n, s) => (n.endsWith(s) && typed.has(n.slice(0, -s.length)) ? n.slice(0, -s.length) : n),
      name,
    );
    if (!typed.has(family)) fail('has no TYPE line before it');
  }
  return parsePrometheusTextFormat(text);
}

/** The value of one counter or gauge sample; undefined when the family or label set is missing. */
export function sample(
  families: PrometheusFamily[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const family = families.find((f) => f.name === name);
  const hit = family?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v));
  if (hit?.value === undefined) return undefined;
  return hit.value.endsWith('Inf') ? (hit.value.startsWith('-') ? -Infinity : Infinity) : Number(hit.value);
}
