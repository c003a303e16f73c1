import type { ConfigType } from '@nestjs/config';
import type { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { DataSource } from 'typeorm';
import { AuditRetentionWorker } from '../src/audit/audit-retention.worker';
import { LoginAttemptsService } from '../src/auth/login-attempts.service';
import { MeterEventsRepository } from '../src/billing/meter-events.repository';
import { MeterEventsWorker } from '../src/billing/meter-events.worker';
import { StripeGateway } from '../src/billing/stripe-gateway';
import { BackgroundJobs } from '../src/common/time/background-jobs';
import { Clock } from '../src/common/time/clock';
import { PeriodicTask, type PeriodicTaskOptions } from '../src/common/time/periodic-task';
import { billingConfig } from '../src/config/billing.config';
import { embeddingsConfig } from '../src/config/embeddings.config';
import { webhooksConfig } from '../src/config/webhooks.config';
import { Database } from '../src/database/database';
import { Embedder } from '../src/embeddings/embedder';
import { EmbeddingWorker } from '../src/embeddings/embedding.worker';
import { EndUsersService } from '../src/end-users/end-users.service';
import { ErasureWorker } from '../src/end-users/erasure.worker';
import { IdempotencyRetentionWorker } from '../src/idempotency/idempotency-retention.worker';
import { KnowledgeService } from '../src/knowledge/knowledge.service';
import { KnowledgeTermRefillWorker } from '../src/knowledge/knowledge-term-refill.worker';
import { MemoryRetentionWorker } from '../src/memory/memory-retention.worker';
import { PostingsTrimWorker } from '../src/memory/postings-trim.worker';
import type { MetricsService } from '../src/metrics/metrics.service';
import { SpendService } from '../src/spend/spend.service';
import { ToolTurnsRetentionWorker } from '../src/tools/tool-turns-retention.worker';
import { FailingEndpointsWorker } from '../src/webhooks/failing-endpoints.worker';
import { WebhookDeliveryWorker } from '../src/webhooks/webhook-delivery.worker';
import { WebhooksRepository } from '../src/webhooks/webhooks.repository';
import { respond, uniqueUserId } from './support/data-plane';
import { FakeEmbeddings } from './support/fake-embeddings';
import { FakeStripe } from './support/fake-stripe';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { createApiKey, tenantWithKey, uniqueEmail } from './support/identity';
import { describeRecordedStatements, type RecordedFiles } from './support/recorded-statements';
import type { TestApp } from './support/test-app';
import { createWebhookEndpoint, lookupOrderTool } from './support/tools';
import { eventually } from './support/wait';
import { WebhookReceiver } from './support/webhook-receiver';

/**
 * What the spec starts before the app: its own database (a pass of a worker takes the due work of
 * every organization, so it runs where no other suite of the run has left any) and the fakes the
 * workers call.
 */
let database: FreshDatabase | undefined;
const embeddings = new FakeEmbeddings();
let stripe: FakeStripe | undefined;
const receiver = new WebhookReceiver();

function started<T>(value: T | undefined, what: string): T {
  if (value === undefined)
    throw new Error(`${what} is read before the spec's beforeAll started it`);
  return value;
}

beforeAll(async () => {
  database = await createFreshDatabase('recorded_workers', process.env.DATABASE_URL);
  stripe = await FakeStripe.start();
  await embeddings.start();
  await receiver.start();
});

afterAll(async () => {
  // After the app (closed by the harness's own afterAll, which runs first).
  await receiver.stop();
  await embeddings.stop();
  await stripe?.close();
  await database?.drop();
});

/**
 * The workers' settings. Their timers are kept out of the recorded passes: the polls that can be
 * set are set to their longest (a first run an hour, or ten minutes, after start); the app's
 * webhook delivery loop is stopped before its passes are recorded; the rest either send the same
 * statements whoever takes the rows (a purge's one DELETE) or get their work queued in the worker's
 * own chain of runs (queuedBeforeNextRun). The URLs are read when the harness builds the app, once
 * the beforeAll above has started what they name.
 */
const ENV: Record<string, string | undefined> = {
  get DATABASE_URL() {
    return started(database, 'the database').url;
  },
  ERASURE_GRACE_SECONDS: '0',
  ERASURE_POLL_INTERVAL_MS: '3600000',
  MEMORY_PURGE_INTERVAL_MS: '86400000',
  MEMORY_POSTINGS_TRIM_INTERVAL_MS: '3600000',
  AUDIT_PURGE_INTERVAL_MS: '86400000',
  WEBHOOK_POLL_INTERVAL_MS: '60000',
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  EMBEDDINGS_MODEL: 'fake-embed',
  get EMBEDDINGS_BASE_URL() {
    return embeddings.url;
  },
  EMBEDDINGS_API_KEY: 'sk-embeddings',
  EMBEDDINGS_POLL_INTERVAL_MS: '3600000',
  STRIPE_SECRET_KEY: 'sk_test_recorded',
  get STRIPE_API_BASE() {
    return started(stripe, 'the fake Stripe').baseUrl;
  },
  STRIPE_MAX_NETWORK_RETRIES: '0',
  STRIPE_TIMEOUT_MS: '2000',
  STRIPE_METER_EVENT_NAME: 'active_relationships',
  STRIPE_TOKEN_METER_EVENT_NAME: 'provider_tokens',
  STRIPE_METER_POLL_INTERVAL_MS: '600000',
  // A failed event is not due again within the spec.
  STRIPE_METER_RETRY_BASE_MS: '3600000',
};

/**
 * A PeriodicTask-driven worker's chain of runs (private to it): `prepare` queued there runs after
 * the run in progress, if any, and the worker's next "do it now" call queued right after it (in
 * the same tick) is the first run to see what `prepare` made; a timer run can come only after.
 */
function queuedBeforeNextRun(worker: object, prepare: () => Promise<unknown>): Promise<unknown> {
  const task = (worker as { task?: unknown }).task;
  if (!(task instanceof PeriodicTask)) {
    throw new Error(`${worker.constructor.name} keeps its runs in no PeriodicTask named task`);
  }
  return task.exclusive(prepare);
}

/** BackgroundJobs for a second instance of a worker: nothing starts; the runs are kept. */
class CapturedJobs extends BackgroundJobs {
  readonly runs: Array<() => Promise<void>> = [];

  constructor() {
    super('command');
  }

  override add(): void {}

  override periodic(options: PeriodicTaskOptions): PeriodicTask {
    this.runs.push(options.run);
    return new PeriodicTask(options);
  }
}

/** Metrics of a second instance: registered nowhere (the app's instance holds the names). */
const NO_METRICS = {
  gauge: () => undefined,
  counter: () => ({ inc: () => undefined }),
} as unknown as MetricsService;

/** A logger of a second instance: what it warns or logs as an error fails the pass. */
function strictLogger(): PinoLogger & { problems: unknown[] } {
  const problems: unknown[] = [];
  const ignore = () => undefined;
  const keep = (...args: unknown[]) => void problems.push(args);
  return {
    problems,
    setContext: ignore,
    trace: ignore,
    debug: ignore,
    info: ignore,
    warn: keep,
    error: keep,
    fatal: keep,
  } as unknown as PinoLogger & { problems: unknown[] };
}

const config = <T>(t: TestApp, key: string | symbol) =>
  t.app.get<unknown, T>(key, { strict: false });

const sql = (t: TestApp, text: string, values: unknown[] = []) =>
  t.app.get(DataSource).query<Array<Record<string, unknown>>>(text, values);

/**
 * One pass of a WebhookDeliveryWorker of its own (the app's loop is stopped): started, it claims,
 * makes the attempts it got, records their outcomes, claims again, and is stopped once those
 * `claims` claims and `outcomes` recordings are done. The loop then waits WEBHOOK_POLL_INTERVAL_MS
 * (a minute): nothing else is sent before the stop.
 */
function deliveryPass(t: TestApp, claims: number, outcomes: number) {
  return async () => {
    const repository = t.app.get(WebhooksRepository);
    const claimed: Array<Promise<unknown>> = [];
    const recorded: Array<Promise<unknown>> = [];
    const counted = Object.create(repository) as WebhooksRepository;
    counted.claimDue = (...args) => {
      const claim = repository.claimDue(...args);
      claimed.push(claim);
      return claim;
    };
    counted.recordOutcomes = (...args) => {
      const recording = repository.recordOutcomes(...args);
      recorded.push(recording);
      return recording;
    };
    const logger = strictLogger();
    const worker = new WebhookDeliveryWorker(
      counted,
      config<ConfigType<typeof webhooksConfig>>(t, webhooksConfig.KEY),
      t.app.get(Clock),
      logger,
      NO_METRICS,
      new CapturedJobs(),
    );
    worker.start();
    try {
      await eventually(
        () => (claimed.length >= claims && recorded.length >= outcomes ? true : undefined),
        `${claims} claims and ${outcomes} recordings`,
      );
      await Promise.all([...claimed, ...recorded]);
    } finally {
      await worker.stop();
    }
    expect({
      claims: claimed.length,
      outcomes: recorded.length,
      problems: logger.problems,
    }).toEqual({ claims, outcomes, problems: [] });
  };
}

/** The runs a second instance of the worker registers, for the jobs that have no public call. */
function capturedRuns(build: (jobs: CapturedJobs, logger: PinoLogger) => unknown) {
  const jobs = new CapturedJobs();
  const logger = strictLogger();
  build(jobs, logger);
  return {
    runs: jobs.runs.map((run) => async () => {
      await run();
      expect(logger.problems).toEqual([]);
    }),
  };
}

/** The embedding cursor of `source`, and whether its next claim promotes its pending bound. */
async function cursorOf(t: TestApp, source: string) {
  const [row] = await sql(
    t,
    `SELECT position::float8 AS position, safe_bound::float8 AS safe,
            pending_bound::float8 AS pending, pending_xmax IS NOT NULL AS marked,
            pending_xmax IS NOT NULL
              AND pg_snapshot_xmin(pg_current_snapshot())::text::bigint >= pending_xmax AS promotes
       FROM embedding_cursors WHERE source = $1 AND model = 'fake-embed'`,
    [source],
  );
  return row as
    | { position: number; safe: number; pending: number | null; marked: boolean; promotes: boolean }
    | undefined;
}

const FILES: RecordedFiles = {
  'failing-endpoints.worker.sql': async ({ t, operation }) => {
    const worker = t.app.get(FailingEndpointsWorker);
    const owner = await tenantWithKey(t, ['admin']);
    const endpoint = await createWebhookEndpoint(t, owner.auth, receiver.url('fail/disabled'));
    const sections = [
      await operation('a pass with no endpoint failing long enough', async () =>
        expect(await worker.disableDue()).toEqual([]),
      ),
    ];
    // Failing for longer than WEBHOOK_DISABLE_AFTER_HOURS (72): disabled, its organization's
    // owner told (a mail).
    const [, section] = await Promise.all([
      queuedBeforeNextRun(worker, () =>
        sql(
          t,
          `UPDATE webhook_endpoints SET failing_since = now() - interval '73 hours' WHERE id = $1`,
          [endpoint.id],
        ),
      ),
      operation('a pass disabling one endpoint (its owner told)', async () =>
        expect((await worker.disableDue()).map((disabled) => disabled.id)).toEqual([endpoint.id]),
      ),
    ]);
    sections.push(section);
    return sections;
  },

  'webhook-delivery.worker.sql': async ({ t, operation }) => {
    // The app's own loop would claim what the passes below are to claim.
    await t.app.get(WebhookDeliveryWorker).stop();
    const sections = [await operation('a pass with nothing due', deliveryPass(t, 1, 0))];
    const owner = await tenantWithKey(t, ['admin']);
    const path = `ok/${randomUUID()}`;
    const endpoint = await createWebhookEndpoint(t, owner.auth, receiver.url(path));
    const ping = await t
      .http()
      .post(`/v1/webhook-endpoints/${endpoint.id}/test`)
      .set('Authorization', owner.auth);
    expect(ping.status).toBe(202);
    sections.push(
      await operation(
        'a pass delivering one attempt (then a claim that finds none)',
        deliveryPass(t, 2, 1),
      ),
    );
    expect(receiver.at(`/${path}`)).toHaveLength(1);
    const [attempt] = await sql(
      t,
      'SELECT status, event_id FROM webhook_delivery_attempts WHERE endpoint_id = $1',
      [endpoint.id],
    );
    expect(attempt.status).toBe('succeeded');
    // Past retention (30 days), every attempt made.
    await sql(
      t,
      `UPDATE webhook_events SET created_at = now() - interval '31 days' WHERE id = $1`,
      [attempt.event_id],
    );
    const { runs } = capturedRuns(
      (jobs, logger) =>
        new WebhookDeliveryWorker(
          t.app.get(WebhooksRepository),
          config<ConfigType<typeof webhooksConfig>>(t, webhooksConfig.KEY),
          t.app.get(Clock),
          logger,
          NO_METRICS,
          jobs,
        ),
    );
    sections.push(
      await operation('the hourly purge, one event past retention', async () => {
        expect(runs).toHaveLength(1);
        await runs[0]();
      }),
    );
    expect(await sql(t, 'SELECT id FROM webhook_events WHERE id = $1', [attempt.event_id])).toEqual(
      [],
    );
    return sections;
  },

  'erasure.worker.sql': async ({ t, tenant, operation }) => {
    const worker = t.app.get(ErasureWorker);
    const sections = [
      await operation('a pass with nothing due', async () =>
        expect(await worker.eraseDue()).toBe(0),
      ),
    ];
    // An end user with memories, a relationship and an audit trail, due at once (grace 0).
    const { auth, personalityId, caller } = await tenant();
    const userId = uniqueUserId();
    const reply = await respond(t, auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'I started a new job today',
    });
    expect(reply.status).toBe(200);
    await t.app.get(EndUsersService).scheduleErasure(caller, userId);
    sections.push(
      await operation('a pass with one end user to erase', async () =>
        expect(await worker.eraseDue()).toBe(1),
      ),
    );
    return sections;
  },

  'embedding.worker.sql': async ({ t, tenant, operation }) => {
    const { runs } = capturedRuns(
      (jobs, logger) =>
        new EmbeddingWorker(
          t.app.get(Database),
          t.app.get(Embedder),
          t.app.get(Clock),
          logger,
          config<ConfigType<typeof embeddingsConfig>>(t, embeddingsConfig.KEY),
          jobs,
          NO_METRICS,
        ),
    );
    expect(runs).toHaveLength(1);
    const pass = runs[0];
    const { organizationId, auth, personalityId } = await tenant();
    const reply = await respond(t, auth, {
      personality_id: personalityId,
      user_id: uniqueUserId(),
      message: 'We spent two weeks in Crete',
    });
    expect(reply.status).toBe(200);
    const [{ first, last }] = await sql(
      t,
      `SELECT min(id)::float8 AS first, max(id)::float8 AS last FROM memories
        WHERE organization_id = $1`,
      [organizationId],
    );
    // A memory is read once its id is final: the cursor's pending bound, marked by one run with
    // the transactions then running, is promoted to safe by a later run once they have all ended.
    // The runs before that one, unrecorded: until the bound covers the memories and is marked.
    for (let run = 0; ; run++) {
      const memories = await cursorOf(t, 'memories');
      if (memories && memories.safe >= (first as number)) {
        throw new Error('the memories were embedded before the recorded pass');
      }
      if (memories?.marked && memories.pending! >= (last as number)) break;
      if (run > 5) throw new Error(`the cursor never got ready: ${JSON.stringify(memories)}`);
      await pass();
    }
    // Transaction ids are the server's: a long transaction of another database delays it.
    await eventually(
      async () => ((await cursorOf(t, 'memories'))?.promotes ? true : undefined),
      'every transaction older than the mark to end',
      30_000,
    );
    // Nothing of knowledge_chunks for the recorded run to read.
    const chunks = await cursorOf(t, 'knowledge_chunks');
    expect(chunks && (chunks.pending ?? 0) <= chunks.position).toBe(true);
    const sections = [
      await operation("a pass embedding one exchange's memories (no knowledge chunk new)", pass),
    ];
    const [embedded] = await sql(
      t,
      'SELECT count(*)::int AS n FROM memory_embeddings WHERE memory_id BETWEEN $1 AND $2',
      [first, last],
    );
    expect(embedded.n).toBe((last as number) - (first as number) + 1);
    sections.push(await operation('a pass with nothing new', pass));
    return sections;
  },

  'meter-events.worker.sql': async ({ t, operation }) => {
    const worker = t.app.get(MeterEventsWorker);
    const fake = started(stripe, 'the fake Stripe');
    const sections = [await operation('a pass with nothing due', () => worker.runOnce())];
    // An organization billed by meter (a Stripe customer): each new relationship queues an event.
    const owner = await tenantWithKey(t, ['read_write']);
    const admin = `Bearer ${await createApiKey(t, owner.accessToken, ['admin'], 'admin key')}`;
    const customer = await t.http().post('/v1/billing/payment-methods').set('Authorization', admin);
    expect(customer.status).toBe(201);
    const personality = await t
      .http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', owner.auth)
      .send({ slug: 'sage-mentor' });
    const relationship = async () => {
      const reply = await respond(t, owner.auth, {
        personality_id: personality.body.id as string,
        user_id: uniqueUserId(),
        message: 'Hello there',
      });
      expect(reply.status).toBe(200);
    };
    const sent = () => fake.requestsTo('POST', /^\/v1\/billing\/meter_events$/).length;
    await relationship();
    sections.push(
      await operation('a pass sending one event', async () => {
        await worker.runOnce();
        expect(sent()).toBe(1);
      }),
    );
    await relationship();
    fake.fail('POST', /^\/v1\/billing\/meter_events$/, 500, 1);
    sections.push(
      await operation('a pass whose one event Stripe fails (due again later)', async () => {
        await worker.runOnce();
        expect(sent()).toBe(2);
      }),
    );
    // The delivered event, 91 days old: past the purge's 90.
    await sql(
      t,
      `UPDATE meter_events SET occurred_at = now() - interval '91 days'
        WHERE organization_id = $1 AND status = 'delivered'`,
      [owner.organizationId],
    );
    const { runs } = capturedRuns(
      (jobs, logger) =>
        new MeterEventsWorker(
          t.app.get(MeterEventsRepository),
          t.app.get(StripeGateway),
          config<ConfigType<typeof billingConfig>>(t, billingConfig.KEY),
          t.app.get(Clock),
          logger,
          NO_METRICS,
          jobs,
        ),
    );
    expect(runs).toHaveLength(2);
    sections.push(
      await operation('the hourly purge, one event delivered 91 days ago', () => runs[1]()),
    );
    const [left] = await sql(
      t,
      `SELECT count(*)::int AS n FROM meter_events WHERE organization_id = $1`,
      [owner.organizationId],
    );
    expect(left.n).toBe(1);
    return sections;
  },

  'memory-retention.worker.sql': async ({ t, tenant, operation }) => {
    const { organizationId, auth, personalityId } = await tenant();
    const reply = await respond(t, auth, {
      personality_id: personalityId,
      user_id: uniqueUserId(),
      message: 'My sister Clara plays the cello',
    });
    expect(reply.status).toBe(200);
    await sql(t, 'UPDATE organizations SET memory_retention_days = 1 WHERE id = $1', [
      organizationId,
    ]);
    await sql(
      t,
      `UPDATE memories SET created_at = now() - interval '2 days' WHERE organization_id = $1`,
      [organizationId],
    );
    // One DELETE of a bounded batch whether a timer run took these first or not.
    const section = await operation("a pass, an organization's memories past its retention", () =>
      t.app.get(MemoryRetentionWorker).purgeExpired(),
    );
    expect(
      await sql(t, 'SELECT id FROM memories WHERE organization_id = $1', [organizationId]),
    ).toEqual([]);
    return [section];
  },

  'postings-trim.worker.sql': async ({ t, tenant, operation }) => {
    const { auth, personalityId } = await tenant();
    const userId = uniqueUserId();
    const reply = await respond(t, auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'My sister Clara plays the cello',
    });
    expect(reply.status).toBe(200);
    // As the trigger writes a word down when another reply at once held its postings.
    const [{ id: endUserId }] = await sql(
      t,
      `INSERT INTO memory_terms_to_trim (end_user_id, lexeme)
       SELECT end_user_id, 'cello' FROM memories WHERE content = 'My sister Clara plays the cello'
        ORDER BY id DESC LIMIT 1
       RETURNING end_user_id AS id`,
    );
    const section = await operation('a pass, one word waiting', () =>
      t.app.get(PostingsTrimWorker).trimNow(),
    );
    // This end user's word, let go: nothing past its 64 (another section's rows are not ours).
    expect(
      await sql(t, 'SELECT id FROM memory_terms_to_trim WHERE end_user_id = $1', [endUserId]),
    ).toEqual([]);
    return [section];
  },

  'tool-turns-retention.worker.sql': async ({ t, operation }) => {
    const owner = await tenantWithKey(t, ['read_write']);
    const personality = await t
      .http()
      .post('/v1/personalities/from-catalog')
      .set('Authorization', owner.auth)
      .send({ slug: 'sage-mentor', tools: [lookupOrderTool] });
    expect(personality.status).toBe(201);
    const paused = await respond(t, owner.auth, {
      personality_id: personality.body.id as string,
      user_id: uniqueUserId(),
      message: 'Where is it? lookup_order({"order_id": "A-1042"})',
    });
    expect(paused.body).toMatchObject({ status: 'requires_action' });
    await sql(
      t,
      `UPDATE tool_turns SET expires_at = now() - interval '1 minute' WHERE organization_id = $1`,
      [owner.organizationId],
    );
    const section = await operation('a pass, one paused turn expired', () =>
      t.app.get(ToolTurnsRetentionWorker).purgeExpired(),
    );
    expect(
      await sql(t, 'SELECT id FROM tool_turns WHERE organization_id = $1', [owner.organizationId]),
    ).toEqual([]);
    return [section];
  },

  'idempotency-retention.worker.sql': async ({ t, operation }) => {
    const owner = await tenantWithKey(t, ['read_write']);
    const key = randomUUID();
    const created = await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', owner.auth)
      .set('Idempotency-Key', key)
      .send({ user_id: uniqueUserId() });
    expect(created.status).toBe(201);
    await sql(
      t,
      `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = $1`,
      [key],
    );
    const section = await operation('a pass, one key past its 24 hours', () =>
      t.app.get(IdempotencyRetentionWorker).purgeExpired(),
    );
    expect(await sql(t, 'SELECT key FROM idempotency_keys WHERE key = $1', [key])).toEqual([]);
    return [section];
  },

  'audit-retention.worker.sql': async ({ t, operation }) => {
    const owner = await tenantWithKey(t, ['read_write']);
    await sql(
      t,
      `UPDATE audit_events SET created_at = now() - interval '400 days' WHERE organization_id = $1`,
      [owner.organizationId],
    );
    const section = await operation(
      "a pass, an organization's events past AUDIT_RETENTION_DAYS",
      () => t.app.get(AuditRetentionWorker).purgeExpired(),
    );
    expect(
      await sql(t, 'SELECT id FROM audit_events WHERE organization_id = $1', [
        owner.organizationId,
      ]),
    ).toEqual([]);
    return [section];
  },

  'knowledge-term-refill.worker.sql': async ({ t, tenant, operation }) => {
    const worker = t.app.get(KnowledgeTermRefillWorker);
    const sections = [
      await operation('a pass with nothing queued', async () =>
        expect(await worker.refillNow()).toBe(0),
      ),
    ];
    const { organizationId } = await tenant();
    await t.app.get(KnowledgeService).create(organizationId, {
      title: 'Lanterns',
      content: 'Every lantern in the shop is lit at dusk.',
    });
    // A word queued for refill (as a delete leaving it short of postings does), in the worker's
    // chain: the timer's run every 2 s cannot take it before the recorded pass.
    const [, section] = await Promise.all([
      queuedBeforeNextRun(worker, () =>
        sql(t, `INSERT INTO knowledge_term_refills VALUES ($1, 'lantern')`, [organizationId]),
      ),
      operation('a pass refilling one queued word', async () =>
        expect(await worker.refillNow()).toBe(1),
      ),
    ]);
    sections.push(section);
    return sections;
  },

  'login-attempts.service.prune.sql': async ({ t, operation }) => {
    const email = uniqueEmail('pruned');
    const login = await t
      .http()
      .post('/v1/auth/login')
      .send({ email, password: 'not the password' });
    expect(login.status).toBe(401);
    await sql(
      t,
      `UPDATE login_attempts SET updated_at = now() - interval '3 days' WHERE email = $1`,
      [email],
    );
    const section = await operation('the hourly prune, one address untouched for 3 days', () =>
      t.app.get(LoginAttemptsService).prune(),
    );
    expect(await sql(t, 'SELECT email FROM login_attempts WHERE email = $1', [email])).toEqual([]);
    return [section];
  },

  'spend.service.purge-lapsed.sql': async ({ t, operation }) => [
    await operation('the purge every minute of lapsed reservations', () =>
      t.app.get(SpendService).purgeLapsed(),
    ),
  ],
};

/**
 * The background jobs: one pass of each, as its timer runs it (the workers' "do it now" calls,
 * or the run a second instance of the worker registers where there is none).
 */
describeRecordedStatements(
  'the statements each background pass sends (src/queries/*.worker.sql)',
  FILES,
  ENV,
);
