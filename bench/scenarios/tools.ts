import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Client } from 'pg';
import { type RunningService, startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';
import { loadAverages, percentile, round2, sleep, timings } from './support/stats';

/**
 * Tools (contract §26, issue 30, "Figures"): one instance of the built service on a fresh
 * database, the local engine (it calls tool `T` when the message holds `T({...})`), webhook tools
 * on a receiver on loopback. Three parts, one after the other:
 * 1. round: the service time a webhook tool round adds over the endpoint's own time. Sequential
 *    replies, alternating a message that calls the tool and the same message without the call;
 *    added = p(with) − p(without) − p(the receiver's own handling time). Goal p50 ≤ 5 ms.
 * 2. pending: 1,000 client-tool turns paused at once; the service's RSS before and after (RSS:
 *    the service cannot be made to collect garbage from outside); then every turn resumed, 32 at a
 *    time: every resumption 200 completed, exactly 2 memories per turn in the database, and a
 *    second resumption of each answers 409.
 * 3. hang: one organization's 50 concurrent replies whose webhook tool never answers (timeout_ms
 *    5000; TOOL_CALLS_IN_FLIGHT_PER_ORG raised to 64 so that all 50 hang, the worst case), two
 *    waves; meanwhile another organization's replies, one at a time, each calling its own webhook
 *    tool that answers at once. Its latency alone (before and after) and during the hang.
 */

const ROUND_WARMUP = 50;
const ROUND_SAMPLES = Number(process.env.BENCH_TOOLS_ROUND_SAMPLES ?? 300);
const PENDING_TURNS = Number(process.env.BENCH_TOOLS_PENDING_TURNS ?? 1_000);
const RESUME_CONCURRENCY = 32;
const HANGING_REPLIES = 50;
const HANG_TIMEOUT_MS = 5_000;
const HANG_WAVES = 2;
const ALONE_SAMPLES = 300;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

/** The business's endpoint: `/ok/…` answers `{"output": …}` at once, `/hang/…` never answers. */
class ToolReceiver {
  /** Each `/ok` call's handling time: its request's arrival to its answer's last byte, in ms. */
  readonly handlingMs: number[] = [];
  openHanging = 0;
  maxOpenHanging = 0;
  private readonly sockets = new Set<Socket>();
  private readonly server: Server;

  constructor() {
    this.server = createServer((request, response) => this.handle(request, response));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const arrived = performance.now();
    if (request.url?.startsWith('/hang/')) {
      this.openHanging++;
      this.maxOpenHanging = Math.max(this.maxOpenHanging, this.openHanging);
      request.socket.once('close', () => this.openHanging--);
      request.resume();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as Json;
      response.once('finish', () => this.handlingMs.push(performance.now() - arrived));
      response
        .writeHead(200, { 'content-type': 'application/json' })
        .end(JSON.stringify({ output: { echo: event.data.arguments } }));
    });
  }
}

async function call(
  url: string,
  auth: string,
  body: unknown,
  method = 'POST',
): Promise<{ status: number; body: Json; ms: number }> {
  const started = performance.now();
  const response = await fetch(url, {
    method,
    headers: { 'content-type': 'application/json', authorization: auth },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  const ms = performance.now() - started;
  return { status: response.status, body: text ? (JSON.parse(text) as Json) : {}, ms };
}

/** A tenant whose personality has the given tools; webhook tools name an endpoint at `url`. */
async function tenantWithTools(
  service: RunningService,
  tools: Array<{ name: string; url?: string; timeoutMs?: number }>,
) {
  const tenant = await benchTenant(service.baseUrl);
  const definitions: Json[] = [];
  for (const tool of tools) {
    const definition: Json = {
      name: tool.name,
      description: `The ${tool.name} tool`,
      parameters: { type: 'object', properties: { at: { type: 'string' } } },
      execution: tool.url ? 'webhook' : 'client',
    };
    if (tool.url) {
      const endpoint = await call(`${service.baseUrl}/v1/webhook-endpoints`, tenant.ownerAuth, {
        url: tool.url,
        events: ['end_user.deleted'],
      });
      if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.status}`);
      definition.endpoint_id = endpoint.body.id;
      if (tool.timeoutMs) definition.timeout_ms = tool.timeoutMs;
    }
    definitions.push(definition);
  }
  const patched = await call(
    `${service.baseUrl}/v1/personalities/${tenant.personalityId}`,
    tenant.auth,
    { tools: definitions },
    'PATCH',
  );
  if (patched.status !== 200)
    throw new Error(`tools: ${patched.status} ${JSON.stringify(patched)}`);
  const respond = (userId: string, message: string) =>
    call(`${service.baseUrl}/v1/respond`, tenant.auth, {
      personality_id: tenant.personalityId,
      user_id: userId,
      message,
    });
  return { ...tenant, respond };
}

const WITH_TOOL = 'Can you book me in? book({"at": "2026-12-01T09:00"})';
const WITHOUT_TOOL = 'Can you book me in? book at "2026-12-01T09:00" please';

function expectCompleted(answer: { status: number; body: Json }, toolOutput?: string): void {
  if (answer.status !== 200 || answer.body.status !== 'completed')
    throw new Error(`reply: ${answer.status} ${JSON.stringify(answer.body)}`);
  if (toolOutput && !String(answer.body.reply.text).includes(toolOutput))
    throw new Error(`the tool's output is not in the reply: ${answer.body.reply.text}`);
}

async function webhookRound(service: RunningService, receiverUrl: string, receiver: ToolReceiver) {
  const tenant = await tenantWithTools(service, [{ name: 'book', url: `${receiverUrl}/ok/round` }]);
  const output = '(book: {"echo":{"at":"2026-12-01T09:00"}})';
  for (let i = 0; i < ROUND_WARMUP; i++) {
    expectCompleted(await tenant.respond('round-with', WITH_TOOL), output);
    expectCompleted(await tenant.respond('round-without', WITHOUT_TOOL));
  }
  receiver.handlingMs.length = 0;
  const withTool: number[] = [];
  const withoutTool: number[] = [];
  // Alternating, so that the machine's load drifts over both alike.
  for (let i = 0; i < ROUND_SAMPLES; i++) {
    const a = await tenant.respond('round-with', WITH_TOOL);
    expectCompleted(a, output);
    withTool.push(a.ms);
    const b = await tenant.respond('round-without', WITHOUT_TOOL);
    expectCompleted(b);
    withoutTool.push(b.ms);
  }
  const endpoint = [...receiver.handlingMs];
  const added = (p: number) =>
    round2(percentile(withTool, p) - percentile(withoutTool, p) - percentile(endpoint, p));
  return {
    samples: ROUND_SAMPLES,
    warm_up: ROUND_WARMUP,
    with_tool_call: timings(withTool),
    without_tool_call: timings(withoutTool),
    endpoint_handling: timings(endpoint),
    added_ms: { p50: added(50), p99: added(99) },
  };
}

async function pendingTurns(service: RunningService, db: Client) {
  const tenant = await tenantWithTools(service, [{ name: 'lookup' }]);
  // Warm the paths (pause, resume) before the first reading of the RSS.
  for (let i = 0; i < 20; i++) {
    const paused = await tenant.respond(`warm-${i}`, 'lookup({"at": "now"})');
    const callId = paused.body.tool_calls[0].id as string;
    await call(
      `${service.baseUrl}/v1/respond/turns/${paused.body.turn_id}/tool-outputs`,
      tenant.auth,
      { outputs: [{ tool_call_id: callId, output: { ok: true } }] },
    );
  }
  const rssBefore = memoryOf(service.pid);
  const turns: Array<{ turnId: string; callId: string }> = [];
  const pool = async <T>(count: number, work: (i: number) => Promise<T>): Promise<T[]> => {
    const results: T[] = new Array<T>(count);
    let next = 0;
    const worker = async () => {
      while (next < count) {
        const i = next++;
        results[i] = await work(i);
      }
    };
    await Promise.all(Array.from({ length: RESUME_CONCURRENCY }, worker));
    return results;
  };
  const pauseMs = await pool(PENDING_TURNS, async (i) => {
    const paused = await tenant.respond(`pending-${i}`, `Where is it? lookup({"at": "${i}"})`);
    if (paused.status !== 200 || paused.body.status !== 'requires_action')
      throw new Error(`pause: ${paused.status} ${JSON.stringify(paused.body)}`);
    turns[i] = { turnId: paused.body.turn_id, callId: paused.body.tool_calls[0].id };
    return paused.ms;
  });
  const rssAfter = memoryOf(service.pid);
  const { rows: stored } = await db.query<{ pending: string }>(
    `SELECT count(*) AS pending FROM tool_turns WHERE organization_id = $1 AND status = 'pending'`,
    [tenant.organizationId],
  );

  const resume = (i: number) =>
    call(`${service.baseUrl}/v1/respond/turns/${turns[i].turnId}/tool-outputs`, tenant.auth, {
      outputs: [{ tool_call_id: turns[i].callId, output: { at: i } }],
    });
  const resumed = await pool(PENDING_TURNS, resume);
  const completed = resumed.filter(
    (answer, i) =>
      answer.status === 200 &&
      answer.body.status === 'completed' &&
      String(answer.body.reply.text).includes(`(lookup: {"at":${i}})`),
  ).length;
  const rssResumed = memoryOf(service.pid);
  const again = await pool(PENDING_TURNS, resume);
  const conflicts = again.filter(
    (answer) => answer.status === 409 && answer.body.error?.code === 'turn_not_pending',
  ).length;

  // Memories per turn (one end user per turn): the message and the reply, exactly once.
  const { rows } = await db.query<{ memories: number; users: string }>(
    `SELECT per_user.memories, count(*) AS users
       FROM (SELECT count(m.id)::int AS memories
               FROM end_users u LEFT JOIN memories m ON m.end_user_id = u.id
              WHERE u.organization_id = $1 AND u.user_id LIKE 'pending-%'
              GROUP BY u.id) AS per_user
      GROUP BY per_user.memories`,
    [tenant.organizationId],
  );
  const usersByMemories = Object.fromEntries(rows.map((row) => [row.memories, Number(row.users)]));
  return {
    turns: PENDING_TURNS,
    pending_in_database: Number(stored[0].pending),
    pause_latency: timings(pauseMs),
    service_rss_mib: {
      before: round2(rssBefore.rss_mib),
      with_turns_pending: round2(rssAfter.rss_mib),
      growth: round2(rssAfter.rss_mib - rssBefore.rss_mib),
      after_resuming: round2(rssResumed.rss_mib),
      peak_hwm: round2(rssResumed.hwm_mib),
      note: 'RSS of the service process (/proc/<pid>/status VmRSS); a GC cannot be forced from outside, so garbage not yet collected counts too',
    },
    resume_latency: timings(resumed.map((answer) => answer.ms)),
    resumed_completed: completed,
    lost: PENDING_TURNS - completed,
    end_users_by_memory_count: usersByMemories,
    double_stored: Object.entries(usersByMemories)
      .filter(([memories]) => Number(memories) > 2)
      .reduce((sum, [, users]) => sum + users, 0),
    second_resumption_409: conflicts,
  };
}

async function hangingOrganization(
  service: RunningService,
  receiverUrl: string,
  receiver: ToolReceiver,
) {
  const hanging = await tenantWithTools(service, [
    { name: 'book', url: `${receiverUrl}/hang/a`, timeoutMs: HANG_TIMEOUT_MS },
  ]);
  const other = await tenantWithTools(service, [{ name: 'book', url: `${receiverUrl}/ok/b` }]);
  const output = '(book: {"echo":{"at":"2026-12-01T09:00"}})';
  const alone = async (samples: number) => {
    const ms: number[] = [];
    for (let i = 0; i < samples; i++) {
      const answer = await other.respond(`other-${i % 20}`, WITH_TOOL);
      expectCompleted(answer, output);
      ms.push(answer.ms);
    }
    return ms;
  };
  await alone(30);
  const aloneBefore = await alone(ALONE_SAMPLES);

  const during: number[] = [];
  const hangingAnswers: Array<{ status: number; body: Json; ms: number }> = [];
  for (let wave = 0; wave < HANG_WAVES; wave++) {
    let settled = false;
    const replies = Promise.all(
      Array.from({ length: HANGING_REPLIES }, (_, i) => hanging.respond(`hanging-${i}`, WITH_TOOL)),
    ).then((answers) => {
      settled = true;
      hangingAnswers.push(...answers);
    });
    const deadline = Date.now() + 10_000;
    while (receiver.openHanging < HANGING_REPLIES && Date.now() < deadline) await sleep(10);
    // Only the replies sent while all of the organization's calls hang count.
    while (!settled && receiver.openHanging >= HANGING_REPLIES) {
      const answer = await other.respond(`other-${during.length % 20}`, WITH_TOOL);
      expectCompleted(answer, output);
      if (receiver.openHanging >= HANGING_REPLIES) during.push(answer.ms);
    }
    await replies;
  }
  const aloneAfter = await alone(ALONE_SAMPLES);

  const timedOut = hangingAnswers.filter(
    (answer) =>
      answer.status === 200 &&
      answer.body.status === 'completed' &&
      String(answer.body.reply.text).includes('(book: {"error":'),
  ).length;
  const p99 = (values: number[]) => percentile(values, 99);
  const aloneP99 = Math.max(p99(aloneBefore), p99(aloneAfter));
  const noise = Math.abs(p99(aloneBefore) - p99(aloneAfter));
  return {
    hanging_organization: {
      replies_per_wave: HANGING_REPLIES,
      waves: HANG_WAVES,
      timeout_ms: HANG_TIMEOUT_MS,
      max_calls_open_at_the_endpoint: receiver.maxOpenHanging,
      replies_completed_with_an_error_output: timedOut,
      reply_latency: timings(hangingAnswers.map((answer) => answer.ms)),
    },
    other_organization: {
      alone_before: timings(aloneBefore),
      during_the_hang: timings(during),
      alone_after: timings(aloneAfter),
      p99_noise_between_alone_runs_ms: round2(noise),
      p99_during_minus_alone_ms: round2(p99(during) - aloneP99),
    },
    within_noise: p99(during) - aloneP99 <= Math.max(noise, 0.25 * aloneP99),
  };
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const receiver = new ToolReceiver();
  const receiverUrl = await receiver.start();
  const service = await startService({
    env: {
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_ALLOWED_PORTS: '1-65535',
      TOOL_CALLS_IN_FLIGHT_PER_ORG: '64',
      LOG_LEVEL: 'warn',
    },
  });
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const started = performance.now();
    const round = await webhookRound(service, receiverUrl, receiver);
    const pending = await pendingTurns(service, db);
    const hang = await hangingOrganization(service, receiverUrl, receiver);
    return {
      load_average_at_start: loadAtStart,
      load_average_at_end: loadAverages(),
      seconds: round2((performance.now() - started) / 1000),
      method: `One instance of the built service (node dist/main.js) on a fresh database, local engine, webhook tools on a receiver on loopback (WEBHOOK_ALLOW_PRIVATE_URLS, TOOL_CALLS_IN_FLIGHT_PER_ORG=64 so that all ${HANGING_REPLIES} calls of part 3 hang). 1) ${ROUND_SAMPLES} sequential pairs after ${ROUND_WARMUP} warm-up pairs: /v1/respond with a message calling a webhook tool whose endpoint answers at once, then the same message without the call; added = percentile(with) - percentile(without) - percentile(the receiver's handling time, request arrival to answer sent). 2) ${PENDING_TURNS} client-tool turns paused (${RESUME_CONCURRENCY} at a time, one end user each), the service's RSS before and after; all resumed ${RESUME_CONCURRENCY} at a time, memories counted per end user in the database, each resumed again. 3) ${HANG_WAVES} waves of ${HANGING_REPLIES} concurrent replies of one organization whose webhook tool never answers (timeout_ms ${HANG_TIMEOUT_MS}); another organization's replies (each calling its own webhook tool, answering at once) one at a time, ${ALONE_SAMPLES} alone before, during the hang (only replies sent and answered while all ${HANGING_REPLIES} calls were open), ${ALONE_SAMPLES} alone after; within noise: p99 during minus the larger alone p99 <= max(the two alone p99s' difference, 25% of the alone p99).`,
      webhook_round: round,
      pending_client_turns: pending,
      hanging_webhook_tools: hang,
      goals: {
        'webhook tool round adds p50 <= 5 ms over the endpoint': round.added_ms.p50 <= 5,
        '1,000 pending turns: RSS growth <= 32 MiB': pending.service_rss_mib.growth <= 32,
        '1,000 pending turns: 0 lost': pending.lost === 0,
        '1,000 pending turns: 0 double-stored':
          pending.double_stored === 0 && pending.end_users_by_memory_count[2] === PENDING_TURNS,
        'a second resumption answers 409': pending.second_resumption_409 === PENDING_TURNS,
        "another organization's p99 unchanged within noise during the hang": hang.within_noise,
      },
    };
  } finally {
    await db.end();
    await service.stop();
    await receiver.stop();
  }
}
