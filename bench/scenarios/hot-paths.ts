import { buildRevision } from '../lib/build-revision';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures, type LoadOptions } from '../lib/load';
import { type RunningService, startService } from '../lib/service';
import { benchTenant } from './support/data-plane';
import { loadAverages, median, round3 } from './support/stats';

/** The code before issue 19's refactor (the parent of "Composed statements as typed values"). */
const BEFORE = process.env.BENCH_BEFORE ?? '9ff1098^';
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SECONDS = 10;

type Build = 'before' | 'after' | 'after_without_part_three';
type Endpoint = 'public_get' | 'create_end_user' | 'respond';
const ENDPOINTS: Endpoint[] = ['public_get', 'create_end_user', 'respond'];

interface Measurement extends LoadFigures {
  cpu_us_per_request: number;
}

/** Every safety setting of the organization off (crisis response, input and output moderation). */
async function safetyOff(service: RunningService, tenant: Awaited<ReturnType<typeof benchTenant>>) {
  const response = await fetch(
    `${service.baseUrl}/v1/organizations/${tenant.organizationId}/safety`,
    {
      method: 'PATCH',
      headers: { 'content-type': 'application/json', authorization: tenant.ownerAuth },
      body: JSON.stringify({
        crisis_response: 'off',
        input_moderation: 'off',
        output_moderation: 'off',
      }),
    },
  );
  if (response.status !== 200) throw new Error(`PATCH safety: ${response.status}`);
}

/**
 * The hot paths before and after the refactor of issue 19 (typed statements, one database entry
 * point, one clock, typed config): a public GET (`/v1/vocabularies/emotions/changelog`),
 * `POST /v1/end-users` (a new user_id per request) and `/v1/respond` (local engine, a new end
 * user every 50 replies), each build on a fresh database of its own, both running, measured one
 * at a time at 32 connections for 10 s, the order swapped each round; requests/s and the
 * service's CPU per request, medians over the rounds. Goal: no path slower than before, within
 * noise. The "after" build is this checkout, which also holds everything built since: for
 * `/v1/respond` that is part three's work on every reply (safety checks of the message and the
 * reply, the spend reservation, recall and facts), not only the refactor; so `/v1/respond` is
 * also measured on a third service of this build with recall off (`MEMORY_RECALL_LIMIT=0`) and
 * its organization's safety settings off.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const before = buildRevision(BEFORE);
  const services: Partial<Record<Build, RunningService>> = {};
  try {
    services.before = await startService({ main: before.main });
    services.after = await startService();
    services.after_without_part_three = await startService({
      env: { MEMORY_RECALL_LIMIT: '0' },
    });
    const tenants = {
      before: await benchTenant(services.before.baseUrl),
      after: await benchTenant(services.after.baseUrl),
      after_without_part_three: await benchTenant(services.after_without_part_three.baseUrl),
    };
    await safetyOff(services.after_without_part_three, tenants.after_without_part_three);
    let counter = 0;
    const optionsFor = (build: Build, endpoint: Endpoint): LoadOptions => {
      const { baseUrl } = services[build]!;
      const tenant = tenants[build];
      const headers = { 'content-type': 'application/json', authorization: tenant.auth };
      switch (endpoint) {
        case 'public_get':
          return { url: `${baseUrl}/v1/vocabularies/emotions/changelog` };
        case 'create_end_user':
          return {
            url: `${baseUrl}/v1/end-users`,
            method: 'POST',
            headers,
            requests: [
              {
                setupRequest: (request) => ({
                  ...request,
                  body: JSON.stringify({ user_id: `hot-${build}-${counter++}` }),
                }),
              },
            ],
          };
        case 'respond':
          return {
            url: `${baseUrl}/v1/respond`,
            method: 'POST',
            headers,
            requests: [
              {
                setupRequest: (request) => ({
                  ...request,
                  body: JSON.stringify({
                    personality_id: tenant.personalityId,
                    user_id: `talk-${build}-${Math.floor(counter++ / 50)}`,
                    message: 'I had a long day at work today and I feel a bit tired.',
                  }),
                }),
              },
            ],
          };
      }
    };
    const measure = async (build: Build, endpoint: Endpoint): Promise<Measurement> => {
      const options = optionsFor(build, endpoint);
      await load({ ...options, durationSeconds: 3 });
      const cpuBefore = cpuSeconds(services[build]!.pid);
      const figures = await load({ ...options, durationSeconds: SECONDS });
      const cpu = cpuSeconds(services[build]!.pid) - cpuBefore;
      if (figures.errors > 0 || figures.non_2xx > 0) {
        throw new Error(`${build} ${endpoint}: ${JSON.stringify(figures)}`);
      }
      return { ...figures, cpu_us_per_request: Math.round((cpu * 1e6) / figures.requests) };
    };

    const rounds: Array<Record<Endpoint, Record<Build, Measurement>>> = [];
    for (let round = 0; round < ROUNDS; round++) {
      const figures = {} as Record<Endpoint, Record<Build, Measurement>>;
      for (const endpoint of ENDPOINTS) {
        const builds: Build[] =
          endpoint === 'respond'
            ? ['before', 'after', 'after_without_part_three']
            : ['before', 'after'];
        const shift = round % builds.length;
        figures[endpoint] = {} as Record<Build, Measurement>;
        for (const build of [...builds.slice(shift), ...builds.slice(0, shift)]) {
          figures[endpoint][build] = await measure(build, endpoint);
        }
      }
      rounds.push(figures);
    }

    const summary = Object.fromEntries(
      ENDPOINTS.map((endpoint) => {
        const of = (build: Build, figure: 'requests_per_sec' | 'cpu_us_per_request') =>
          median(rounds.map((r) => r[endpoint][build][figure]));
        return [
          endpoint,
          {
            before: {
              requests_per_sec: of('before', 'requests_per_sec'),
              cpu_us_per_request: of('before', 'cpu_us_per_request'),
            },
            after: {
              requests_per_sec: of('after', 'requests_per_sec'),
              cpu_us_per_request: of('after', 'cpu_us_per_request'),
            },
            requests_per_sec_after_to_before: round3(
              median(
                rounds.map(
                  (r) => r[endpoint].after.requests_per_sec / r[endpoint].before.requests_per_sec,
                ),
              ),
            ),
            cpu_per_request_after_to_before: round3(
              median(
                rounds.map(
                  (r) =>
                    r[endpoint].after.cpu_us_per_request / r[endpoint].before.cpu_us_per_request,
                ),
              ),
            ),
            per_round_requests_per_sec: rounds.map((r) => ({
              before: r[endpoint].before.requests_per_sec,
              after: r[endpoint].after.requests_per_sec,
            })),
            ...(endpoint === 'respond' && {
              after_without_part_three: {
                requests_per_sec: of('after_without_part_three', 'requests_per_sec'),
                cpu_us_per_request: of('after_without_part_three', 'cpu_us_per_request'),
                requests_per_sec_to_before: round3(
                  median(
                    rounds.map(
                      (r) =>
                        r.respond.after_without_part_three.requests_per_sec /
                        r.respond.before.requests_per_sec,
                    ),
                  ),
                ),
              },
            }),
          },
        ];
      }),
    );
    return {
      before_revision: before.revision,
      rounds: ROUNDS,
      seconds_per_run: SECONDS,
      connections: 32,
      load_average_at_start: loadAtStart,
      load_average_at_end: loadAverages(),
      summary,
      goal: 'no hot path slower than before the refactor, within noise (ratios over rounds)',
      rounds_detail: rounds,
    };
  } finally {
    await services.before?.stop();
    await services.after?.stop();
    await services.after_without_part_three?.stop();
    before.cleanup();
  }
}
