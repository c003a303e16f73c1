import { createServer, type Server } from 'node:http';
import { loadavg } from 'node:os';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { Cte, sql, withEntries } from '../../src/database/sql';
import { webhookEventStep } from '../../src/webhooks/webhook-event.step';
import { cpuSeconds } from '../lib/cpu';
import { startService } from '../lib/service';
import { percentile } from './support/stats';

/**
 * Outbox throughput (issue 12): events written to the outbox the way a one-statement change
 * writes them (webhook-event.step.ts), delivered by ONE instance of the built service to a
 * local receiver that answers 200 at once. Two phases on the same instance:
 * - backlog: 10,000 events written as fast as the database takes them; events/s is the delivered
 *   count over the time from the first write to the last arrival (the drain rate);
 * - paced: 10,000 events written at PACED_RATE events/s; the lag of each event is its arrival at
 *   the receiver minus its `created_at` (the change), and p50/p99/max are reported.
 * Default configuration (WEBHOOK_POLL_INTERVAL_MS 500, WEBHOOK_CONCURRENCY 64).
 */
const EVENTS = 10_000;
const WRITE_BATCH = 100;
const PACED_RATE = 500;
const PACED_TICK_MS = 50;

interface Arrival {
  at: number;
  createdAt: number;
  id: string;
}

function startReceiver(arrivals: Map<string, Arrival[]>): Promise<Server> {
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        id: string;
        created_at: string;
        data: { phase: string };
      };
      const list = arrivals.get(body.data.phase) ?? [];
      list.push({ at, createdAt: Date.parse(body.created_at), id: body.id });
      arrivals.set(body.data.phase, list);
      response.writeHead(200).end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)));
}

async function waitForArrivals(count: () => number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (count() < EVENTS) {
    if (Date.now() > deadline) throw new Error(`only ${count()} of ${EVENTS} events arrived`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const arrivals = new Map<string, Arrival[]>();
  const receiver = await startReceiver(arrivals);
  const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
  const service = await startService({
    env: {
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      // The receiver listens on a random port.
      WEBHOOK_ALLOWED_PORTS: '1-65535',
      LOG_LEVEL: 'warn',
      // To compare settings; unset: the defaults.
      WEBHOOK_CONCURRENCY: process.env.WEBHOOK_CONCURRENCY ?? '',
    },
  });
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const signup = await fetch(`${service.baseUrl}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        email: `bench-${Date.now()}@example.test`,
        password: 'correct horse battery staple',
      }),
    });
    const { access_token: token, organization } = (await signup.json()) as {
      access_token: string;
      organization: { id: string };
    };
    const endpoint = await fetch(`${service.baseUrl}/v1/webhook-endpoints`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ url: receiverUrl, events: ['end_user.created'] }),
    });
    if (endpoint.status !== 201)
      throw new Error(`endpoint: ${endpoint.status} ${await endpoint.text()}`);

    // The SQL a one-statement change appends: the webhooks module's own step.
    let written = 0;
    const write = async (phase: string, count: number) => {
      const ids = Array.from({ length: count }, () => `user-${written++}`);
      const changed = new Cte(
        'changed',
        sql`SELECT jsonb_build_object('user_id', u, 'phase', ${phase}::text) AS webhook_data
              FROM unnest(${ids}::text[]) AS u`,
        ['webhook_data'],
      );
      const statement = withEntries(
        [
          changed,
          webhookEventStep(changed, {
            organizationId: organization.id,
            type: 'end_user.created',
            at: new Date(),
          }),
        ],
        sql`SELECT 1`,
      );
      await db.query(statement.text, [...statement.values]);
    };

    // Backlog: write everything, then let it drain.
    const loadBefore = loadavg()[0];
    const cpuAtBacklog = cpuSeconds(service.pid);
    const backlogStarted = Date.now();
    for (let i = 0; i < EVENTS; i += WRITE_BATCH) await write('backlog', WRITE_BATCH);
    const backlogWrittenMs = Date.now() - backlogStarted;
    await waitForArrivals(() => arrivals.get('backlog')?.length ?? 0, 300_000);
    const backlog = arrivals.get('backlog')!;
    const backlogSeconds = (Math.max(...backlog.map((a) => a.at)) - backlogStarted) / 1000;

    const backlogCpu = cpuSeconds(service.pid) - cpuAtBacklog;
    // Paced: PACED_RATE events/s in ticks of PACED_TICK_MS.
    const cpuAtPaced = cpuSeconds(service.pid);
    const perTick = (PACED_RATE * PACED_TICK_MS) / 1000;
    const pacedStarted = Date.now();
    for (let tick = 0; tick * perTick < EVENTS; tick++) {
      const due = pacedStarted + tick * PACED_TICK_MS;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      await write('paced', perTick);
    }
    const pacedWriteSeconds = (Date.now() - pacedStarted) / 1000;
    await waitForArrivals(() => arrivals.get('paced')?.length ?? 0, 300_000);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const pacedCpu = cpuSeconds(service.pid) - cpuAtPaced;
    const paced = arrivals.get('paced')!;
    const lags = paced.map((a) => a.at - a.createdAt).sort((x, y) => x - y);
    const backlogLags = backlog.map((a) => a.at - a.createdAt).sort((x, y) => x - y);
    const duplicates =
      backlog.length + paced.length - new Set([...backlog, ...paced].map((a) => a.id)).size;

    return {
      description:
        'One instance of the built service delivering outbox events to a local receiver answering 200 at once; default WEBHOOK_POLL_INTERVAL_MS (500) and WEBHOOK_CONCURRENCY (64); PostgreSQL and the receiver on the same machine',
      events_per_phase: EVENTS,
      backlog: {
        written_in_ms: backlogWrittenMs,
        delivered: backlog.length,
        events_per_second: Math.round(backlog.length / backlogSeconds),
        lag_ms: {
          p50: percentile(backlogLags, 50),
          p99: percentile(backlogLags, 99),
          max: backlogLags.at(-1),
        },
        service_cpu_ms_per_event: Number(((backlogCpu * 1000) / EVENTS).toFixed(3)),
        note: 'lag here is queueing behind the whole backlog, not the delivery delay',
      },
      paced: {
        offered_events_per_second: PACED_RATE,
        written_in_seconds: Number(pacedWriteSeconds.toFixed(1)),
        delivered: paced.length,
        delivered_events_per_second: Math.round(
          paced.length / ((Math.max(...paced.map((a) => a.at)) - pacedStarted) / 1000),
        ),
        lag_ms: { p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags.at(-1) },
        service_cpu_ms_per_event: Number(((pacedCpu * 1000) / EVENTS).toFixed(3)),
      },
      machine_load_average_1m: { before: loadBefore, after: loadavg()[0] },
      duplicates,
      goal: 'events_per_second >= 500 and paced p99 lag < 2000 ms with one instance',
    };
  } finally {
    await db.end();
    await service.stop();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
}
