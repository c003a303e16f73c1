import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { load, type LoadOptions } from '../lib/load';
import { freshDatabase, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { sleep } from './support/stats';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  hitCount: number;
  children?: number[];
}

const IDLE = new Set(['(idle)', '(program)', '(garbage collector)']);

function where(url: string): string {
  const parts = url.split('/');
  const modules = parts.lastIndexOf('node_modules');
  if (modules >= 0)
    return parts
      .slice(modules + 1, modules + (parts[modules + 1].startsWith('@') ? 3 : 2))
      .join('/');
  const dist = parts.lastIndexOf('dist');
  if (dist >= 0) return parts.slice(dist + 1).join('/');
  return url.startsWith('node:') ? url : url || '(native)';
}

function summarize(file: string) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[] };
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  let busy = 0;
  let gc = 0;
  const self = new Map<string, number>();
  const inclusive = new Map<string, number>();
  const selfByPlace = new Map<string, number>();
  const walk = (node: ProfileNode, stack: Set<string>): number => {
    const name = node.callFrame.functionName || '(anonymous)';
    const frame = `${name} ${where(node.callFrame.url)}:${node.callFrame.lineNumber}`;
    let total = IDLE.has(name) ? 0 : node.hitCount;
    if (name === '(garbage collector)') gc += node.hitCount;
    if (!IDLE.has(name)) {
      busy += node.hitCount;
      self.set(frame, (self.get(frame) ?? 0) + node.hitCount);
      const place = where(node.callFrame.url);
      selfByPlace.set(place, (selfByPlace.get(place) ?? 0) + node.hitCount);
    }
    const added = !stack.has(frame);
    if (added) stack.add(frame);
    for (const child of node.children ?? []) total += walk(byId.get(child)!, stack);
    if (added) {
      stack.delete(frame);
      inclusive.set(frame, (inclusive.get(frame) ?? 0) + total);
    }
    return total;
  };
  walk(profile.nodes[0], new Set());
  const top = (map: Map<string, number>, n: number) =>
    Object.fromEntries(
      [...map]
        .sort((a, b) => b[1] - a[1])
        .slice(0, n)
        .map(([k, v]) => [k, Number((v / busy).toFixed(4))]),
    );
  return {
    busy_samples: busy,
    gc_samples: gc,
    self: top(self, 40),
    self_by_place: top(selfByPlace, 30),
    inclusive: top(inclusive, 80),
  };
}

export async function run(): Promise<Record<string, unknown>> {
  const database = await freshDatabase();
  const file = join(mkdtempSync(join(tmpdir(), 'respond-profile-')), 'service.cpuprofile');
  const preload = resolve(__dirname, '../lib/cpu-profile-preload.js');
  const service = await startService({
    databaseUrl: database.url,
    main: process.env.BENCH_MAIN,
    env: { NODE_OPTIONS: `--require ${preload}`, CPU_PROFILE_FILE: file },
  });
  try {
    const tenant = await benchTenant(service.baseUrl);
    let counter = 0;
    const options: LoadOptions = {
      url: `${service.baseUrl}/v1/respond`,
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: tenant.auth },
      requests: [
        {
          setupRequest: (request) => ({
            ...request,
            body: JSON.stringify({
              personality_id: tenant.personalityId,
              user_id: `talk-${Math.floor(counter++ / 50)}`,
              message: 'I had a long day at work today and I feel a bit tired.',
            }),
          }),
        },
      ],
    };
    await load({ ...options, durationSeconds: 3 });
    service.process.kill('SIGUSR2');
    const figures = await load({ ...options, durationSeconds: 10 });
    service.process.kill('SIGUSR2');
    for (let waited = 0; !existsSync(file) && waited < 10_000; waited += 100) await sleep(100);
    return { figures, profile_file: file, ...summarize(file) };
  } finally {
    await service.stop();
    await database.drop();
  }
}
