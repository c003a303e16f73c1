import { loadavg } from 'node:os';

/** The nearest-rank percentile (p in 0..100) of the values. */
export function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

export const median = (values: readonly number[]) => percentile(values, 50);

export const round2 = (value: number) => Number(value.toFixed(2));
export const round3 = (value: number) => Number(value.toFixed(3));

/** The 1-minute load average: the machine is shared (2 cores), so every figure records it. */
export const load1 = () => round2(loadavg()[0]);
export const loadAverages = () => loadavg().map(round2);

/** p50 / p90 / p99 / max of timings in ms. */
export function timings(values: readonly number[]) {
  return {
    count: values.length,
    p50_ms: round2(percentile(values, 50)),
    p90_ms: round2(percentile(values, 90)),
    p99_ms: round2(percentile(values, 99)),
    max_ms: round2(Math.max(...values)),
  };
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
