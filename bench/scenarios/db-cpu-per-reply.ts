import { readdirSync, readFileSync } from 'node:fs';
import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, round2 } from './support/stats';

/**
 * The database's CPU per reply (issue 29: ≤ 3 ms with recall on), beside the service's: REPLIES
 * replies to `/v1/respond` (local engine, defaults: recall 8, safety, budgets), 32 at a time, a
 * new end user every 50 as the hot-paths bench does, each build on a fresh database of its own.
 * CPU is read from /proc per window of WINDOW replies: the service's process, and every process
 * named `postgres` on this machine (so run it on an idle machine, against a local server:
 * BENCH_DATABASE_URL or the embedded default). BENCH_BEFORE (default 0185ce2, before the
 * memory_terms trim fix) and this tree take turns for ROUNDS rounds. Windows show whether the cost
 * grows as the tables do.
 */

const BEFORE = process.env.BENCH_BEFORE ?? '0185ce2';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const REPLIES = Number(process.env.BENCH_REPLIES ?? 4_000);
const WINDOW = 1_000;
const CONCURRENCY = 32;
const REPLIES_PER_END_USER = 50;
const MESSAGE = 'I had a long day at work today and I feel a bit tired.';

/** CPU seconds of every PostgreSQL process on this machine. */
function postgresCpuSeconds(): number {
  let total = 0;
  for (const pid of readdirSync('/proc').filter((entry) => /^\d+$/.test(entry))) {
    try {
      if (readFileSync(`/proc/${pid}/comm`, 'utf8').trim() === 'postgres') {
        total += cpuSeconds(Number(pid));
      }
    } catch {
      // The process ended meanwhile.
    }
  }
  return total;
}

interface Window {
  replies: number;
  replies_per_second: number;
  service_cpu_ms_per_reply: number;
  database_cpu_ms_per_reply: number;
}

async function measure(service: RunningService): Promise<Window[]> {
  const tenant = await benchTenant(service.baseUrl);
  const windows: Window[] = [];
  const mark = () => ({
    at: performance.now(),
    service: cpuSeconds(service.pid),
    database: postgresCpuSeconds(),
  });
  let last = mark();
  let sent = 0;
  let done = 0;
  const worker = async () => {
    while (sent < REPLIES) {
      const userId = `cpu-${Math.floor(sent++ / REPLIES_PER_END_USER)}`;
      const response = await fetch(`${service.baseUrl}/v1/respond`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenant.auth },
        body: JSON.stringify({
          personality_id: tenant.personalityId,
          user_id: userId,
          message: MESSAGE,
        }),
      });
      await response.arrayBuffer();
      if (response.status !== 200) throw new Error(`respond: ${response.status}`);
      if (++done % WINDOW === 0) {
        const now = mark();
        windows.push({
          replies: done,
          replies_per_second: Math.round((WINDOW / (now.at - last.at)) * 1000),
          service_cpu_ms_per_reply: round2(((now.service - last.service) * 1000) / WINDOW),
          database_cpu_ms_per_reply: round2(((now.database - last.database) * 1000) / WINDOW),
        });
        last = now;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return windows;
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const before = buildRevision(BEFORE);
  const rounds: Array<{ before: Window[]; this_tree: Window[] }> = [];
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const figures: Partial<Record<'before' | 'this_tree', Window[]>> = {};
      // The order swapped each round.
      const order =
        round % 2 === 0 ? (['before', 'this_tree'] as const) : (['this_tree', 'before'] as const);
      for (const build of order) {
        const service = await startService(build === 'before' ? { main: before.main } : {});
        try {
          figures[build] = await measure(service);
        } finally {
          await service.stop();
        }
      }
      rounds.push({ before: figures.before!, this_tree: figures.this_tree! });
    }
  } finally {
    before.cleanup();
  }
  const lastWindow = (build: 'before' | 'this_tree') =>
    rounds.map((round) => round[build].at(-1)!.database_cpu_ms_per_reply);
  return {
    scenario: 'db-cpu-per-reply',
    measured_at: new Date().toISOString(),
    before_revision: before.revision,
    method: `${REPLIES} replies a build, ${CONCURRENCY} at a time, a new end user every ${REPLIES_PER_END_USER}, local engine, defaults; CPU from /proc per window of ${WINDOW}; ${ROUNDS} rounds, the order swapped each round`,
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    database_cpu_ms_per_reply_last_window: {
      before: lastWindow('before'),
      this_tree: lastWindow('this_tree'),
    },
    goal: 'database CPU per reply <= 3 ms (issue 29)',
    rounds,
  };
}
