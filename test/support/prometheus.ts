import { MetricsService } from '../../src/metrics/metrics.service';
import type { TestApp } from './test-app';

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  samples: Sample[];
  /** `# TYPE` lines: metric family name → counter, gauge, histogram, … */
  types: Map<string, string>;
}

const SAMPLE = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/;
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g;

/** Parses the Prometheus text exposition format (what a scraper reads), strictly enough to fail. */
export function parseExposition(text: string): Exposition {
  const samples: Sample[] = [];
  const types = new Map<string, string>();
  for (const line of text.split('\n')) {
    if (line === '') continue;
    if (line.startsWith('# TYPE ')) {
      const [name, type] = line.slice(7).split(' ');
      types.set(name, type);
      continue;
    }
    if (line.startsWith('#')) continue;
    const match = SAMPLE.exec(line);
    if (!match) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const [, key, value] of (match[2] ?? '').matchAll(LABEL)) {
      labels[key] = value.replace(/\\"/g, '"').replace(/\\n/g, '\n').replace(/\\\\/g, '\\');
    }
    // Prometheus parses values with Go's ParseFloat: NaN and Inf in any case.
    const raw = match[3].toLowerCase();
    const value =
      raw === 'nan' ? NaN : raw === '+inf' ? Infinity : raw === '-inf' ? -Infinity : Number(raw);
    if (Number.isNaN(value) && raw !== 'nan') throw new Error(`bad value: ${line}`);
    samples.push({ name: match[1], labels, value });
  }
  return { samples, types };
}

/** The value of the one sample with this name whose labels include `labels`; 0 when absent. */
export function valueOf(
  exposition: Exposition,
  name: string,
  labels: Record<string, string> = {},
): number {
  const found = exposition.samples.filter(
    (sample) =>
      sample.name === name &&
      Object.entries(labels).every(([key, value]) => sample.labels[key] === value),
  );
  if (found.length > 1) throw new Error(`${name} ${JSON.stringify(labels)} is ambiguous`);
  return found[0]?.value ?? 0;
}

/** The in-process app's counter `name`, summed over the series whose labels include `labels`. */
export async function counterValue(
  t: Pick<TestApp, 'app'>,
  name: string,
  labels: Record<string, string> = {},
): Promise<number> {
  const metric = t.app.get(MetricsService).registry.getSingleMetric(name);
  if (!metric) throw new Error(`no metric ${name}`);
  const { values } = await metric.get();
  return values
    .filter((value) =>
      Object.entries(labels).every(([key, wanted]) => value.labels[key] === wanted),
    )
    .reduce((sum, value) => sum + value.value, 0);
}
