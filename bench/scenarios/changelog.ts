import { startBareBaseline } from '../lib/baseline';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';

const PATH = '/v1/vocabularies/emotions/changelog';
const ROUNDS = 3;

interface Round {
  bare: LoadFigures;
  service: LoadFigures;
  before?: LoadFigures;
  ratio: number;
}

/**
 * GET /v1/vocabularies/emotions/changelog through the whole stack (request id, JSON logs,
 * validation, guards, rate limiting) against a bare NestJS handler returning the same JSON.
 * Goal: ≥ 60% of the bare handler's requests/s, p99 ≤ 2× the bare handler's, no errors.
 *
 * BENCH_BEFORE_MAIN=<another build's dist/main.js> also measures that build in every round, on a
 * database of its own, so a change is compared with its parent under the same conditions.
 */
export async function run(): Promise<Record<string, unknown>> {
  const beforeMain = process.env.BENCH_BEFORE_MAIN;
  const service = await startService();
  let before: RunningService | undefined;
  try {
    before = beforeMain ? await startService({ main: beforeMain }) : undefined;
    const body: unknown = await (await fetch(`${service.baseUrl}${PATH}`)).json();
    const bare = await startBareBaseline(body);
    try {
      // Warm them up so JIT and connection set-up do not count.
      await load({ url: `${bare.baseUrl}${PATH}`, durationSeconds: 3 });
      await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 3 });
      if (before) await load({ url: `${before.baseUrl}${PATH}`, durationSeconds: 3 });
      // This machine's speed drifts from minute to minute: alternate the servers in rounds and
      // keep the median round, so both sides of each ratio ran under the same conditions.
      const rounds: Round[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const bareFigures = await load({ url: `${bare.baseUrl}${PATH}`, durationSeconds: 8 });
        const serviceFigures = await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 8 });
        const beforeFigures = before
          ? await load({ url: `${before.baseUrl}${PATH}`, durationSeconds: 8 })
          : undefined;
        rounds.push({
          bare: bareFigures,
          service: serviceFigures,
          before: beforeFigures,
          ratio: serviceFigures.requests_per_sec / bareFigures.requests_per_sec,
        });
      }
      const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(ROUNDS / 2)];
      const ratioOf = (figures: LoadFigures, bareFigures: LoadFigures) => ({
        ratio_requests_per_sec: Number(
          (figures.requests_per_sec / bareFigures.requests_per_sec).toFixed(3),
        ),
        ratio_p99: Number(
          (figures.latency_p99_ms / Math.max(bareFigures.latency_p99_ms, 1)).toFixed(3),
        ),
      });
      return {
        connections: 32,
        rounds: ROUNDS,
        seconds_per_measurement: 8,
        bare_nest: median.bare,
        service: median.service,
        ...ratioOf(median.service, median.bare),
        ratios_of_all_rounds: rounds.map((entry) => Number(entry.ratio.toFixed(3))),
        ...(median.before
          ? {
              before: {
                build: beforeMain,
                service: median.before,
                ...ratioOf(median.before, median.bare),
                ratios_of_all_rounds: rounds.map((entry) =>
                  Number((entry.before!.requests_per_sec / entry.bare.requests_per_sec).toFixed(3)),
                ),
              },
            }
          : {}),
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
    await before?.stop();
    await service.stop();
  }
}
