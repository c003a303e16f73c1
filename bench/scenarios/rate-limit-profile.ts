import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { load } from '../lib/load';
import { freshDatabase, startService } from '../lib/service';
import { sleep } from './support/stats';

const PATH = '/v1/vocabularies/emotions/changelog';
/** Another build's dist/main.js, profiled the same way as `before`. */
const BEFORE_MAIN = process.env.BENCH_BEFORE_MAIN;

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  hitCount: number;
  children?: number[];
}

/** Source files whose functions (and what they call) count as the limiter. */
const LIMITER = [/\/dist\/rate-limit\//, /@nestjs\/throttler\//];

/**
 * Share of the service's busy samples spent in the limiter: every sample under a frame of the
 * limiter's files (its guard, bucket choice, storage, headers, the framework's ThrottlerGuard),
 * including what those frames call (reflector lookups, Date, setHeader), over all samples but
 * idle ones. A ratio inside one process, so other load on the machine moves it little, unlike
 * requests/s.
 */
function limiterShare(file: string): {
  busy_samples: number;
  limiter_share: number;
  top_limiter_frames: Record<string, number>;
} {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[] };
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  let busy = 0;
  let limiter = 0;
  const frames = new Map<string, number>();
  const walk = (node: ProfileNode, inLimiter: boolean) => {
    const here = inLimiter || LIMITER.some((pattern) => pattern.test(node.callFrame.url));
    const name = node.callFrame.functionName;
    if (name !== '(idle)' && name !== '(program)' && name !== '(garbage collector)') {
      busy += node.hitCount;
      if (here) {
        limiter += node.hitCount;
        const frame = `${name || '(anonymous)'} ${node.callFrame.url.split('/').slice(-2).join('/')}`;
        frames.set(frame, (frames.get(frame) ?? 0) + node.hitCount);
      }
    }
    for (const child of node.children ?? []) walk(byId.get(child)!, here);
  };
  walk(profile.nodes[0], false);
  const top = [...frames].sort((a, b) => b[1] - a[1]).slice(0, 15);
  return {
    busy_samples: busy,
    limiter_share: Number((limiter / busy).toFixed(4)),
    // Self samples of the frames under the limiter, as shares of busy samples.
    top_limiter_frames: Object.fromEntries(
      top.map(([frame, hits]) => [frame, Number((hits / busy).toFixed(4))]),
    ),
  };
}

async function profiled(databaseUrl: string, main?: string) {
  const file = join(mkdtempSync(join(tmpdir(), 'rate-limit-profile-')), 'service.cpuprofile');
  const preload = resolve(__dirname, '../lib/cpu-profile-preload.js');
  const service = await startService({
    databaseUrl,
    main,
    env: { NODE_OPTIONS: `--require ${preload}`, CPU_PROFILE_FILE: file },
  });
  try {
    await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 3 });
    service.process.kill('SIGUSR2');
    await load({ url: `${service.baseUrl}${PATH}`, durationSeconds: 10 });
    service.process.kill('SIGUSR2');
    for (let waited = 0; !existsSync(file) && waited < 10_000; waited += 100) await sleep(100);
  } finally {
    await service.stop();
  }
  return limiterShare(file);
}

/**
 * The limiter's share of the service's CPU on the public changelog (ip bucket, in-memory), from a
 * V8 CPU profile under autocannon load: robust on a shared machine where requests/s are not.
 * Goal: under 5%.
 */
export async function run(): Promise<Record<string, unknown>> {
  const database = await freshDatabase();
  try {
    await (await startService({ databaseUrl: database.url })).stop();
    return {
      load_average_at_start: loadavg().map((value) => Number(value.toFixed(2))),
      path: PATH,
      in_memory: await profiled(database.url),
      ...(BEFORE_MAIN ? { in_memory_before: await profiled(database.url, BEFORE_MAIN) } : {}),
      goal: 'limiter_share < 0.05',
    };
  } finally {
    await database.drop();
  }
}
