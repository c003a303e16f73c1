import { startBareBaseline } from '../lib/baseline';
import { load, type LoadFigures } from '../lib/load';
import { startService } from '../lib/service';

const PATH = '/v1/vocabularies/emotions/changelog';
const ROUNDS = 3;

/**
 * GET /v1/vocabularies/emotions/changelog through the whole stack (request id, JSON logs,
 * validation, guards, rate limiting) against a bare NestJS handler returning the same JSON.
 * Goal: ≥ 60% of the bare handler's requests/s, p99 ≤ 2× the bare handler's, no errors.
 */
export async function run(): Promise<Record<string, unknown>> {
  const service = await startService();
  try {
    const body: unknown = await (await fetch(`${service.baseUrl}${PATH}`)).json();
    const bare = await startBareBaseline(body);
    try {
      // Warm both up so JIT and connection set-up do not count.
      await load({ url: `${bare.baseUrl}${PATH}`, durationSeconds: 3 });
      await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 3 });
      // This machine's speed drifts from minute to minute: alternate the two in rounds and keep
      // the median round, so both sides of each ratio ran under the same conditions.
      const rounds: Array<{ bare: LoadFigures; service: LoadFigures; ratio: number }> = [];
      for (let round = 0; round < ROUNDS; round++) {
        const bareFigures = await load({ url: `${bare.baseUrl}${PATH}`, durationSeconds: 8 });
        const serviceFigures = await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 8 });
        rounds.push({
          bare: bareFigures,
          service: serviceFigures,
          ratio: serviceFigures.requests_per_sec / bareFigures.requests_per_sec,
        });
      }
      const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(ROUNDS / 2)];
      return {
        connections: 32,
        rounds: ROUNDS,
        seconds_per_measurement: 8,
        bare_nest: median.bare,
        service: median.service,
        ratio_requests_per_sec: Number(median.ratio.toFixed(3)),
        ratio_p99: Number(
          (median.service.latency_p99_ms / Math.max(median.bare.latency_p99_ms, 1)).toFixed(3),
        ),
        ratios_of_all_rounds: rounds.map((entry) => Number(entry.ratio.toFixed(3))),
        errors: rounds.reduce(
          (sum, entry) => sum + entry.service.errors + entry.service.non_2xx,
          0,
        ),
        goal: 'ratio_requests_per_sec >= 0.6, ratio_p99 <= 2, zero errors',
      };
    } finally {
      await bare.stop();
    }
  } finally {
    await service.stop();
  }
}
