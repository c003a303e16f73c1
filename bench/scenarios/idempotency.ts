import { loadavg } from 'node:os';
import { load, type LoadFigures } from '../lib/load';
import { startService } from '../lib/service';
import { benchTenant } from './support/data-plane';

const ROUNDS = 3;
const SECONDS_PER_RUN = 5;

/**
 * POST /v1/end-users (a new user_id per request) with and without an `Idempotency-Key` (a new
 * key per request: every request claims a key and stores its answer, two more statements), at
 * 32 connections, in the same service, interleaved: ROUNDS rounds of both variants, the order
 * swapped each round, so drift in the machine's load falls on both. Also the rate of replays
 * (one key sent again and again). Goal: with the header ≥ 0.8 of the rate without it.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadBefore = loadavg()[0];
  const service = await startService({ env: { LOG_LEVEL: 'info' } });
  try {
    const tenant = await benchTenant(service.baseUrl);
    const url = `${service.baseUrl}/v1/end-users`;
    const headers = { 'content-type': 'application/json', authorization: tenant.auth };
    let counter = 0;
    const variant = (keyed: boolean, durationSeconds: number) =>
      load({
        url,
        method: 'POST',
        headers,
        durationSeconds,
        requests: [
          {
            setupRequest: (request) => {
              const n = counter++;
              return {
                ...request,
                headers: keyed ? { ...headers, 'idempotency-key': `bench-key-${n}` } : headers,
                body: JSON.stringify({ user_id: `bench-${n}`, metadata: { n } }),
              };
            },
          },
        ],
      });

    // Warm-up of both paths: JIT, pool connections, per-connection prepared statements.
    await variant(false, 3);
    await variant(true, 3);

    const without: LoadFigures[] = [];
    const withKey: LoadFigures[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      if (round % 2 === 0) {
        without.push(await variant(false, SECONDS_PER_RUN));
        withKey.push(await variant(true, SECONDS_PER_RUN));
      } else {
        withKey.push(await variant(true, SECONDS_PER_RUN));
        without.push(await variant(false, SECONDS_PER_RUN));
      }
    }

    // The first request stores the answer; every later one is its replay.
    const replays = await load({
      url,
      method: 'POST',
      headers: { ...headers, 'idempotency-key': 'bench-replayed' },
      body: JSON.stringify({ user_id: 'bench-replayed' }),
      durationSeconds: SECONDS_PER_RUN,
    });

    const rate = (runs: LoadFigures[]) =>
      Math.round(runs.reduce((sum, r) => sum + r.requests_per_sec, 0) / runs.length);
    const ratio = Number((rate(withKey) / rate(without)).toFixed(3));
    return {
      connections: 32,
      rounds: ROUNDS,
      seconds_per_run: SECONDS_PER_RUN,
      post_end_users_new_without_header: { mean_requests_per_sec: rate(without), runs: without },
      post_end_users_new_with_header: { mean_requests_per_sec: rate(withKey), runs: withKey },
      ratio_with_to_without: ratio,
      post_end_users_replayed: replays,
      // The machine is shared: a 1-minute load average far above its cores means every figure
      // here is a fraction of what the service does alone; the ratio is what compares.
      load_average_1m: { before: loadBefore, after: loadavg()[0] },
      goal: 'with Idempotency-Key >= 0.8 of the rate without it, same run',
      goal_met: ratio >= 0.8,
    };
  } finally {
    await service.stop();
  }
}
