import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { loadavg } from 'node:os';
import { Client } from 'pg';
import { Cte, sql, withEntries } from '../../src/database/sql';
import { webhookEventStep } from '../../src/webhooks/webhook-event.step';
import { cpuSeconds } from '../lib/cpu';
import { startService } from '../lib/service';
import { percentile } from './support/stats';

/**
 * Webhook fairness (contract §25, issue 25): one organization has 20 endpoints that never answer
 * and 800 attempts due (40 changes × 20 endpoints), another has one healthy endpoint. One
 * instance of the built service, default settings (WEBHOOK_TIMEOUT_MS 10 s, WEBHOOK_CONCURRENCY
 * 64, WEBHOOK_CONCURRENCY_PER_ORG 8). Two phases while the hanging organization's backlog is due:
 * - paced: the healthy organization changes 20 times a second for 15 s; its delivery lag (arrival
 *   minus the event's created_at, the change) is reported: goal p99 ≤ 2 s (35.3 s before, the
 *   issue's figure);
 * - backlog: 5,000 changes of the healthy organization at once; the rate at which its endpoint
 *   receives them: goal ≥ 500 events/s.
 * The receiver also counts the hanging organization's open requests at every moment: at most 8.
 */
const HANGING_ENDPOINTS = 20;
const HANGING_CHANGES = 40;
const PACED_RATE = 20;
const PACED_SECONDS = 15;
const BACKLOG = 5_000;

interface Arrival {
  at: number;
  createdAt: number;
}

class Receiver {
  readonly arrivals = new Map<string, Arrival[]>();
  openHanging = 0;
  maxOpenHanging = 0;
  hangingRequests = 0;
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

  count(phase: string): number {
    return this.arrivals.get(phase)?.length ?? 0;
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    if (request.url?.startsWith('/hang/')) {
      this.hangingRequests++;
      this.openHanging++;
      this.maxOpenHanging = Math.max(this.maxOpenHanging, this.openHanging);
      request.socket.once('close', () => this.openHanging--);
      request.resume();
      return;
    }
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const at = Date.now();
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
        created_at: string;
        data: { phase: string };
      };
      const list = this.arrivals.get(body.data.phase) ?? [];
      list.push({ at, createdAt: Date.parse(body.created_at) });
      this.arrivals.set(body.data.phase, list);
      response.writeHead(200).end();
    });
  }
}

async function until(done: () => boolean, timeoutMs: number, what: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const receiver = new Receiver();
  const receiverUrl = await receiver.start();
  const service = await startService({
    env: {
      WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
      WEBHOOK_ALLOWED_PORTS: '1-65535',
      LOG_LEVEL: 'warn',
    },
  });
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  try {
    const tenant = async (urls: string[]) => {
      const signup = await fetch(`${service.baseUrl}/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          email: `bench-${Date.now()}-${Math.random().toString(36).slice(2)}@example.test`,
          password: 'correct horse battery staple',
        }),
      });
      const { access_token: token, organization } = (await signup.json()) as {
        access_token: string;
        organization: { id: string };
      };
      for (const url of urls) {
        const endpoint = await fetch(`${service.baseUrl}/v1/webhook-endpoints`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
          body: JSON.stringify({ url, events: ['end_user.created'] }),
        });
        if (endpoint.status !== 201) throw new Error(`endpoint: ${endpoint.status}`);
      }
      return organization.id;
    };
    const hanging = await tenant(
      Array.from({ length: HANGING_ENDPOINTS }, (_, i) => `${receiverUrl}/hang/${i}`),
    );
    const healthy = await tenant([`${receiverUrl}/ok`]);

    // Changes the way a one-statement change writes its event (webhook-event.step.ts).
    let written = 0;
    const write = async (organizationId: string, phase: string, count: number) => {
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
          webhookEventStep(changed, { organizationId, type: 'end_user.created', at: new Date() }),
        ],
        sql`SELECT 1`,
      );
      await db.query(statement.text, [...statement.values]);
    };

    const loadBefore = loadavg()[0];
    // The hanging organization's 800 attempts, due at once.
    await write(hanging, 'hanging', HANGING_CHANGES);
    await until(() => receiver.hangingRequests >= 8, 10_000, 'the hanging attempts');

    // Paced: the healthy organization's changes while the backlog is due.
    const pacedStarted = Date.now();
    for (let tick = 0; tick < PACED_RATE * PACED_SECONDS; tick++) {
      const due = pacedStarted + (tick * 1000) / PACED_RATE;
      if (due > Date.now()) await new Promise((resolve) => setTimeout(resolve, due - Date.now()));
      await write(healthy, 'paced', 1);
    }
    await until(() => receiver.count('paced') >= PACED_RATE * PACED_SECONDS, 30_000, 'paced');
    const lags = receiver.arrivals
      .get('paced')!
      .map((a) => a.at - a.createdAt)
      .sort((x, y) => x - y);

    // Backlog: 5,000 of the healthy organization's changes at once, the hanging ones still due.
    await write(hanging, 'hanging', HANGING_CHANGES);
    const cpuBefore = cpuSeconds(service.pid);
    const backlogStarted = Date.now();
    for (let i = 0; i < BACKLOG; i += 500) await write(healthy, 'backlog', 500);
    const writtenInMs = Date.now() - backlogStarted;
    await until(() => receiver.count('backlog') >= BACKLOG, 120_000, 'the backlog');
    const backlog = receiver.arrivals.get('backlog')!;
    const drainSeconds = (Math.max(...backlog.map((a) => a.at)) - backlogStarted) / 1000;
    const cpu = cpuSeconds(service.pid) - cpuBefore;

    return {
      description:
        'One instance of the built service, default webhook settings; one organization with 20 endpoints that never answer and 800 attempts due (40 more changes before the backlog phase), another with one healthy endpoint on a local receiver answering 200 at once',
      healthy_paced: {
        offered_events_per_second: PACED_RATE,
        events: lags.length,
        lag_ms: { p50: percentile(lags, 50), p99: percentile(lags, 99), max: lags.at(-1) },
        goal: 'p99 <= 2000 ms (35,300 ms before: issue 25)',
      },
      healthy_backlog: {
        events: BACKLOG,
        written_in_ms: writtenInMs,
        events_per_second: Math.round(BACKLOG / drainSeconds),
        service_cpu_ms_per_event: Number(((cpu * 1000) / BACKLOG).toFixed(3)),
        goal: '>= 500 events/s on one healthy endpoint (4 in flight at most)',
      },
      hanging_organization: {
        endpoints: HANGING_ENDPOINTS,
        requests_received: receiver.hangingRequests,
        max_open_at_once: receiver.maxOpenHanging,
        goal: 'max_open_at_once <= 8 (WEBHOOK_CONCURRENCY_PER_ORG)',
      },
      machine_load_average_1m: { before: loadBefore, after: loadavg()[0] },
    };
  } finally {
    await db.end();
    await service.stop();
    await receiver.stop();
  }
}
