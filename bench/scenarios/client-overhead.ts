import { execFile, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import { promisify } from 'node:util';
import { freePort } from '../../test/support/ports';
import { percentile } from './support/stats';

const CLIENT_DIR = resolve(__dirname, '../../clients/typescript');
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 10);
const CALLS_PER_ROUND = 1_000;
const WARM_UP_CALLS = 2_000;
const GOAL_MS = 0.3;

/**
 * The trivial endpoint: a bare node:http server in a process of its own, answering the two
 * operations measured with small fixed JSON, so the figures are the client's cost and not the
 * service's (whose own cost the other scenarios measure).
 */
const SERVER = `
const http = require('node:http');
const list = JSON.stringify({ data: [], has_more: false });
const user = JSON.stringify({ user_id: 'u', metadata: {}, status: 'active',
  created_at: '2026-01-01T00:00:00.000Z', updated_at: '2026-01-01T00:00:00.000Z' });
http.createServer((request, response) => {
  request.resume();
  request.on('end', () => {
    const post = request.method === 'POST';
    const body = post ? user : list;
    response.writeHead(post ? 201 : 200, {
      'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    response.end(body);
  });
}).listen(Number(process.argv[1]), '127.0.0.1', () => process.send('ready'));
`;

interface Client {
  GET(path: string, init?: object): Promise<{ data?: unknown; error?: unknown }>;
  POST(path: string, init?: object): Promise<{ data?: unknown; error?: unknown }>;
}

function summary(samples: number[]): { p50_ms: number; p99_ms: number; mean_ms: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  const round = (ms: number) => Number(ms.toFixed(4));
  return {
    p50_ms: round(percentile(sorted, 50)),
    p99_ms: round(percentile(sorted, 99)),
    mean_ms: round(sorted.reduce((sum, ms) => sum + ms, 0) / sorted.length),
  };
}

async function timed(call: () => Promise<unknown>, count: number, into: number[]): Promise<void> {
  for (let i = 0; i < count; i++) {
    const started = performance.now();
    await call();
    into.push(performance.now() - started);
  }
}

/** The packed tarball (npm pack, its prepack builds) and what npm reports of it. */
async function packed(): Promise<Record<string, unknown>> {
  const destination = mkdtempSync(join(tmpdir(), 'client-pack-'));
  try {
    const { stdout } = await promisify(execFile)(
      'npm',
      ['pack', '--json', '--pack-destination', destination],
      { cwd: CLIENT_DIR, maxBuffer: 16 * 1024 * 1024 },
    );
    const [report] = JSON.parse(stdout.slice(stdout.search(/^\[/m))) as Array<{
      filename: string;
      size: number;
      unpackedSize: number;
      files: Array<{ path: string; size: number }>;
    }>;
    return {
      filename: report.filename,
      size_bytes: report.size,
      unpacked_bytes: report.unpackedSize,
      files: Object.fromEntries(report.files.map((file) => [file.path, file.size])),
    };
  } finally {
    rmSync(destination, { recursive: true, force: true });
  }
}

function diskSize(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.size;
  return readdirSync(path).reduce((sum, entry) => sum + diskSize(join(path, entry)), 0);
}

/** The runtime dependencies as installed here: direct ones, then what they pull in. */
function runtimeDependencies(): Record<string, unknown> {
  const modules = resolve(CLIENT_DIR, '../../node_modules');
  const manifest = (name: string) =>
    JSON.parse(readFileSync(join(modules, name, 'package.json'), 'utf8')) as {
      version: string;
      dependencies?: Record<string, string>;
    };
  const direct = Object.keys(
    (
      JSON.parse(readFileSync(join(CLIENT_DIR, 'package.json'), 'utf8')) as {
        dependencies: Record<string, string>;
      }
    ).dependencies,
  );
  const all = new Map<string, { version: string; bytes: number }>();
  const visit = (name: string) => {
    if (all.has(name)) return;
    const { version, dependencies = {} } = manifest(name);
    all.set(name, { version, bytes: diskSize(join(modules, name)) });
    Object.keys(dependencies).forEach(visit);
  };
  direct.forEach(visit);
  return {
    direct: Object.fromEntries(direct.map((name) => [name, all.get(name)!.version])),
    installed: Object.fromEntries(all),
    installed_count: all.size,
    installed_bytes: [...all.values()].reduce((sum, entry) => sum + entry.bytes, 0),
  };
}

/**
 * What the client (@personality-api/client, its built CommonJS bundle) adds to a call over a
 * bare `fetch` + `response.json()`: many sequential calls to a trivial local endpoint (a bare
 * node:http server, see SERVER), GET (a list) and POST (a JSON body; the client adds an
 * Idempotency-Key), the two variants interleaved in ROUNDS rounds, the order swapped each
 * round, so the machine's drift falls on both. Goal: p50 overhead ≤ 0.3 ms on each. Also the
 * packed tarball's size and the runtime dependencies.
 */
export async function run(): Promise<Record<string, unknown>> {
  const tarball = await packed(); // builds dist/ as well (prepack)
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- the built bundle, as users load it
  const { PersonalityApi } = require(join(CLIENT_DIR, 'dist', 'index.js')) as {
    PersonalityApi: new (options: { baseUrl: string; apiKey: string }) => Client;
  };

  const port = await freePort();
  const server = spawn(process.execPath, ['-e', SERVER, String(port)], {
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  await new Promise((ready) => server.once('message', ready));
  try {
    const baseUrl = `http://127.0.0.1:${port}`;
    const apiKey = 'pk_bench';
    const api = new PersonalityApi({ baseUrl, apiKey });
    const authorization = `Bearer ${apiKey}`;
    const listPath = '/v1/vocabularies/emotions/changelog';
    const body = { user_id: 'customer-42', metadata: { plan: 'pro' } };
    const variants = {
      get: {
        bare: async () =>
          (await fetch(`${baseUrl}${listPath}`, { headers: { authorization } })).json(),
        client: () => api.GET(listPath),
      },
      post: {
        bare: async () =>
          (
            await fetch(`${baseUrl}/v1/end-users`, {
              method: 'POST',
              headers: { authorization, 'content-type': 'application/json' },
              body: JSON.stringify(body),
            })
          ).json(),
        client: () => api.POST('/v1/end-users', { body }),
      },
    };

    const figures: Record<string, unknown> = {};
    for (const [operation, { bare, client }] of Object.entries(variants)) {
      await timed(bare, WARM_UP_CALLS, []);
      await timed(client, WARM_UP_CALLS, []);
      const samples = { bare: [] as number[], client: [] as number[] };
      const overheads: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const roundBare: number[] = [];
        const roundClient: number[] = [];
        const order = round % 2 === 0 ? ['bare', 'client'] : ['client', 'bare'];
        for (const which of order) {
          if (which === 'bare') await timed(bare, CALLS_PER_ROUND, roundBare);
          else await timed(client, CALLS_PER_ROUND, roundClient);
        }
        samples.bare.push(...roundBare);
        samples.client.push(...roundClient);
        overheads.push(summary(roundClient).p50_ms - summary(roundBare).p50_ms);
      }
      const bareFigures = summary(samples.bare);
      const clientFigures = summary(samples.client);
      figures[operation] = {
        bare_fetch: bareFigures,
        client: clientFigures,
        overhead_p50_ms: Number((clientFigures.p50_ms - bareFigures.p50_ms).toFixed(4)),
        overhead_p99_ms: Number((clientFigures.p99_ms - bareFigures.p99_ms).toFixed(4)),
        overhead_p50_ms_of_each_round: overheads.map((ms) => Number(ms.toFixed(4))),
        goal_met: clientFigures.p50_ms - bareFigures.p50_ms <= GOAL_MS,
      };
    }
    return {
      endpoint: 'a bare node:http server in a process of its own on 127.0.0.1 (fixed small JSON)',
      calls: { rounds: ROUNDS, per_round_and_variant: CALLS_PER_ROUND, warm_up: WARM_UP_CALLS },
      client_version: (
        JSON.parse(readFileSync(join(CLIENT_DIR, 'package.json'), 'utf8')) as { version: string }
      ).version,
      ...figures,
      tarball,
      runtime_dependencies: runtimeDependencies(),
      goal: `client p50 ≤ bare fetch p50 + ${GOAL_MS} ms, for GET and POST`,
      npm: execFileSync('npm', ['--version'], { encoding: 'utf8' }).trim(),
    };
  } finally {
    server.kill('SIGTERM');
  }
}
