import { startBareBaseline } from '../lib/baseline';
import { load } from '../lib/load';
import { startService } from '../lib/service';

const PATH = '/v1/vocabularies/emotions/changelog';

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
      const baseline = await load({ url: `${bare.baseUrl}${PATH}` });
      const full = await load({ url: `${service.baseUrl}${PATH}` });
      return {
        connections: 32,
        duration_seconds: 10,
        bare_nest: baseline,
        service: full,
        ratio_requests_per_sec: Number(
          (full.requests_per_sec / baseline.requests_per_sec).toFixed(3),
        ),
        ratio_p99: Number((full.latency_p99_ms / Math.max(baseline.latency_p99_ms, 1)).toFixed(3)),
        goal: 'ratio_requests_per_sec >= 0.6, ratio_p99 <= 2, zero errors',
      };
    } finally {
      await bare.stop();
    }
  } finally {
    await service.stop();
  }
}
