import { startBareBaseline } from '../lib/baseline';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';

const PATH = '/v1/vocabularies/emotions/changelog';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);

/** With the server's CPU time per request, which a busy machine disturbs far less than req/s. */
type Measured = LoadFigures & { cpu_us_per_request: number };

interface Round {
  bare: Measured;
  service: Measured;
  before?: Measured;
  ratio: number;
}

function cpuPerRequest(all: Measured[]): number {
  const cpu = all.reduce((sum, figures) => sum + figures.cpu_us_per_request * figures.requests, 0);
  return Math.round(cpu / all.reduce((sum, figures) => sum + figures.requests, 0));
}

async function measure(url: string, pid: number): Promise<Measured> {
  const cpuBefore = cpuSeconds(pid);
  const figures = await load({ url, durationSeconds: 8 });
  const cpu = cpuSeconds(pid) - cpuBefore;
  return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
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
        const bareFigures = await measure(`${bare.baseUrl}${PATH}`, bare.pid);
        const serviceFigures = await measure(`${service.baseUrl}${PATH}`, service.pid);
        const beforeFigures = before
          ? await measure(`${before.baseUrl}${PATH}`, before.pid)
          : undefined;
        rounds.push({
          bare: bareFigures,
          service: serviceFigures,
          before: beforeFigures,
          ratio: serviceFigures.requests_per_sec / bareFigures.requests_per_sec,
        });
      }
      const median = [...rounds].sort((a, b) => a.ratio - b.ratio)[Math.floor(ROUNDS / 2)];
      const ratioOf = (figures: Measured, bareFigures: Measured) => ({
        ratio_requests_per_sec: Number(
          (figures.requests_per_sec / bareFigures.requests_per_sec).toFixed(3),
        ),
        ratio_p99: Number(
          (figures.latency_p99_ms / Math.max(bareFigures.latency_p99_ms, 1)).toFixed(3),
        ),
        // Bare CPU per request over ours: the throughput ratio a quiet machine would show.
        ratio_cpu_per_request: Number(
          (bareFigures.cpu_us_per_request / figures.cpu_us_per_request).toFixed(3),
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
        // CPU over requests of all rounds together: steadier than any one round on a busy machine.
        cpu_us_per_request_all_rounds: {
          bare: cpuPerRequest(rounds.map((entry) => entry.bare)),
          service: cpuPerRequest(rounds.map((entry) => entry.service)),
          ...(before ? { before: cpuPerRequest(rounds.map((entry) => entry.before!)) } : {}),
        },
        cpu_ratios_of_all_rounds: rounds.map((entry) =>
          Number((entry.bare.cpu_us_per_request / entry.service.cpu_us_per_request).toFixed(3)),
        ),
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
