import { buildRevision } from '../lib/build-revision';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, round2, timings } from './support/stats';

/**
 * One end user building a long history (issues 29 and 31): REPLIES replies for one end user, 32
 * at a time, the same sentence each time, which is the worst case for ranking by shared words
 * (every memory holds every word of the message). The local engine answers, so the figures are
 * the service's and the database's. The rate of each window of 1,000 replies is recorded, and
 * the whole run is done for the code before part three (BENCH_BEFORE, d950df2) and for this tree,
 * one after the other in the same run.
 */

const BEFORE = process.env.BENCH_BEFORE ?? 'd950df2';
const REPLIES = Number(process.env.BENCH_LONG_HISTORY_REPLIES ?? 20_000);
const CONCURRENCY = 32;
const WINDOW = 1_000;
const MESSAGE = 'I took my dog Rex to the park again today and he loved it, I love that dog.';

async function longHistory(service: RunningService) {
  const tenant = await benchTenant(service.baseUrl);
  const finishedAt: number[] = [];
  const latencies: number[] = [];
  let next = 0;
  let failures = 0;
  const startedAt = performance.now();
  const worker = async () => {
    while (next < REPLIES) {
      next++;
      const sentAt = performance.now();
      const response = await fetch(`${service.baseUrl}/v1/respond`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenant.auth },
        body: JSON.stringify({
          personality_id: tenant.personalityId,
          user_id: 'long-history-user',
          message: MESSAGE,
        }),
      });
      await response.arrayBuffer();
      if (response.status !== 200) failures++;
      const now = performance.now();
      latencies.push(now - sentAt);
      finishedAt.push(now - startedAt);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const windows: number[] = [];
  for (let end = WINDOW; end <= finishedAt.length; end += WINDOW) {
    const from = end === WINDOW ? 0 : finishedAt[end - WINDOW - 1];
    windows.push(round2((WINDOW / (finishedAt[end - 1] - from)) * 1000));
  }
  const seconds = finishedAt[finishedAt.length - 1] / 1000;
  return {
    replies: finishedAt.length,
    failures,
    seconds: round2(seconds),
    replies_per_second: round2(finishedAt.length / seconds),
    first_window_per_second: windows[0],
    last_window_per_second: windows[windows.length - 1],
    last_to_first: round2(windows[windows.length - 1] / windows[0]),
    per_window_per_second: windows,
    latency: timings(latencies),
  };
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const before = buildRevision(BEFORE);
  const results: Record<string, Awaited<ReturnType<typeof longHistory>>> = {};
  try {
    for (const [name, main] of [
      ['before', before.main],
      ['this_tree', undefined],
    ] as const) {
      const service = await startService({ main });
      try {
        results[name] = await longHistory(service);
      } finally {
        await service.stop();
      }
    }
  } finally {
    before.cleanup();
  }
  const { before: old, this_tree: now } = results;
  return {
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    method: `${REPLIES} replies for one end user, ${CONCURRENCY} at a time, the same sentence each time (every memory shares every word of the message), local engine, default settings (recall 8, history 20); rates per window of ${WINDOW} replies; ${BEFORE} (before part three) first, then this tree, one after the other`,
    before_revision: before.revision,
    message: MESSAGE,
    before: old,
    this_tree: now,
    rate_against_before: round2(now.replies_per_second / old.replies_per_second),
    goals: {
      'last window >= 0.8 of the first (issue 31)': now.last_to_first >= 0.8,
      'rate >= 0.8 of before part three (issue 29)':
        now.replies_per_second / old.replies_per_second >= 0.8,
    },
  };
}
