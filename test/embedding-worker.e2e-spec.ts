import type { ConfigType } from '@nestjs/config';
import type { PinoLogger } from 'nestjs-pino';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { BackgroundJobs } from '../src/common/time/background-jobs';
import { ManualClock } from '../src/common/time/clock';
import { PeriodicTask, type PeriodicTaskOptions } from '../src/common/time/periodic-task';
import { embeddingsConfig } from '../src/config/embeddings.config';
import { Database } from '../src/database/database';
import { QueueEmbeddingsByOrganization1795922600000 } from '../src/database/migrations/1795922600000-QueueEmbeddingsByOrganization';
import { APIConnectionTimeoutError } from 'openai';
import { BATCH_TIMEOUT_MS, Embedder } from '../src/embeddings/embedder';
import {
  BATCH_MAX_CHARACTERS,
  DEFERRALS_MAX,
  DEFERRED_FIRST_MS,
  EmbeddingWorker,
  LEASE_MS,
} from '../src/embeddings/embedding.worker';
import type { MetricsService } from '../src/metrics/metrics.service';
import { clonePersonality, importConversation, uniqueUserId } from './support/data-plane';
import { fakeEmbedding } from './support/fake-embeddings';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { tenantWithKey } from './support/identity';
import { HeldTransaction, refusingWrites } from './support/locks';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually, sleep } from './support/wait';

/**
 * An OpenAI-compatible `POST /v1/embeddings` whose answers the spec holds back and lets go one by
 * one (the vectors are fakeEmbedding's), or fails: a provider answering "slowly" for exactly as
 * long as a check needs.
 */
class GatedEmbeddings {
  readonly requests: { input: string[]; answered: boolean }[] = [];
  private held = false;
  private failure: number | null = null;
  private refused: string | null = null;
  private throttled: string | null = null;
  private failing: string | null = null;
  private readonly waiting = new Map<number, () => void>();
  private server: Server | undefined;

  get url(): string {
    return `http://127.0.0.1:${(this.server!.address() as AddressInfo).port}/v1`;
  }

  /** Requests from now on wait for release(). */
  hold(): void {
    this.held = true;
  }

  /** Requests from now on are answered at once (those waiting still wait). */
  open(): void {
    this.held = false;
  }

  release(index: number): void {
    this.waiting.get(index)?.();
    this.waiting.delete(index);
  }

  releaseAll(): void {
    for (const index of [...this.waiting.keys()]) this.release(index);
  }

  /** Refuses (400) a request holding a text that contains `marker`; null: none. */
  refuse(marker: string | null): void {
    this.refused = marker;
  }

  /** Answers 429 to a request holding a text that contains `marker`; null: none. */
  throttle(marker: string | null): void {
    this.throttled = marker;
  }

  /** Answers 500 to a request holding a text that contains `marker` (a self-hosted server past its context); null: none. */
  failOn(marker: string | null): void {
    this.failing = marker;
  }

  /** Answers every request with this status; null: with vectors. */
  failWith(status: number | null): void {
    this.failure = status;
  }

  async start(): Promise<void> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
  }

  async stop(): Promise<void> {
    this.releaseAll();
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
      input: string[];
      dimensions?: number;
    };
    const recorded = { input: body.input, answered: false };
    const index = this.requests.push(recorded) - 1;
    if (this.held) await new Promise<void>((resolve) => this.waiting.set(index, resolve));
    recorded.answered = true;
    if (response.destroyed) return;
    const refused =
      this.refused !== null && body.input.some((text) => text.includes(this.refused!));
    const throttled =
      this.throttled !== null && body.input.some((text) => text.includes(this.throttled!));
    const failing =
      this.failing !== null && body.input.some((text) => text.includes(this.failing!));
    const status = this.failure ?? (refused ? 400 : throttled ? 429 : failing ? 500 : 200);
    response.writeHead(status, { 'content-type': 'application/json' });
    if (status !== 200) {
      response.end(
        JSON.stringify({ error: { message: 'told to fail', type: 'server_error', code: null } }),
      );
      return;
    }
    response.end(
      JSON.stringify({
        object: 'list',
        data: body.input.map((text, i) => ({
          object: 'embedding',
          index: i,
          embedding: fakeEmbedding(text, body.dimensions),
        })),
        usage: { prompt_tokens: 0, total_tokens: 0 },
      }),
    );
  }
}

/** BackgroundJobs of a worker built by the spec: nothing starts; its run is kept. */
class CapturedJobs extends BackgroundJobs {
  run: (() => Promise<void>) | undefined;

  constructor() {
    super('command');
  }

  override add(): void {}

  override periodic(options: PeriodicTaskOptions): PeriodicTask {
    this.run = options.run;
    return new PeriodicTask(options);
  }
}

const NO_METRICS = {
  gauge: () => undefined,
  counter: () => ({ inc: () => undefined }),
} as unknown as MetricsService;

/** One instance's worker: its own clock, its warnings kept, one run per `run()`. */
interface Instance {
  clock: ManualClock;
  warnings: string[];
  run: () => Promise<void>;
}

/**
 * The EmbeddingWorker's claims (docs/memory.md, "Recall by meaning"): the provider is called with
 * no transaction open, under a lease on the batch's queued items that other instances respect
 * while it is live and take over once it has expired. Workers are built by the spec, each with a ManualClock (the
 * app's own worker polls once an hour: never within the spec), and run one pass at a time.
 */
describe('EmbeddingWorker: a lease, not a transaction, across the provider call', () => {
  const provider = new GatedEmbeddings();
  let database: FreshDatabase;
  let db: Client;
  let app: TestApp;
  let auth: string;
  let personalityId: string;
  let other: { auth: string; personalityId: string };
  const pending: Promise<void>[] = [];

  beforeAll(async () => {
    await provider.start();
    database = await createFreshDatabase('embedding_worker', process.env.DATABASE_URL);
    db = new Client({ connectionString: database.url });
    await db.connect();
    app = await createTestApp({
      env: {
        DATABASE_URL: database.url,
        EMBEDDINGS_MODEL: 'fake-embed',
        EMBEDDINGS_BASE_URL: provider.url,
        EMBEDDINGS_API_KEY: 'sk-embeddings',
        EMBEDDINGS_BATCH_SIZE: '10',
        EMBEDDINGS_POLL_INTERVAL_MS: '3600000',
      },
    });
    const tenant = await tenantWithKey(app, ['read_write']);
    auth = tenant.auth;
    personalityId = await clonePersonality(app, auth);
    const otherTenant = await tenantWithKey(app, ['read_write']);
    other = {
      auth: otherTenant.auth,
      personalityId: await clonePersonality(app, otherTenant.auth),
    };
  });
  afterAll(async () => {
    provider.releaseAll();
    await Promise.allSettled(pending);
    await app?.close();
    await db?.end();
    await provider.stop();
    await database?.drop();
  });

  function instance(embedderOf?: (clock: ManualClock) => Embedder): Instance {
    const clock = new ManualClock();
    const warnings: string[] = [];
    const ignore = () => undefined;
    const logger = {
      setContext: ignore,
      trace: ignore,
      debug: ignore,
      info: ignore,
      warn: (_: unknown, message: string) => void warnings.push(message),
      error: (_: unknown, message: string) => void warnings.push(message),
    } as unknown as PinoLogger;
    const jobs = new CapturedJobs();
    new EmbeddingWorker(
      app.app.get(Database),
      embedderOf ? embedderOf(clock) : app.app.get(Embedder),
      clock,
      logger,
      app.app.get<unknown, ConfigType<typeof embeddingsConfig>>(embeddingsConfig.KEY, {
        strict: false,
      }),
      jobs,
      NO_METRICS,
    );
    return { clock, warnings, run: jobs.run! };
  }

  /**
   * New memories (`count`, or these texts) of the spec's tenant (or `tenant`), and the cursor's
   * safe bound past them.
   */
  async function newMemories(
    count: number | string[],
    tenant = { auth, personalityId },
  ): Promise<string> {
    const texts =
      typeof count === 'number'
        ? Array.from({ length: count }, (_, i) => `Lease note ${i} of ${Date.now()}.`)
        : count;
    await importConversation(app, tenant.auth, tenant.personalityId, uniqueUserId('lease'), texts);
    // The bound's own logic (ids final once every older transaction ended) is embeddings.e2e's;
    // with no pending bound, the next claim keeps this one.
    const {
      rows: [{ last }],
    } = await db.query<{ last: string }>(
      `INSERT INTO embedding_cursors (source, model, safe_bound)
       SELECT 'memories', 'fake-embed', max(id) FROM memories
       ON CONFLICT (source, model) DO UPDATE
         SET safe_bound = excluded.safe_bound, pending_bound = NULL, pending_xmax = NULL
       RETURNING safe_bound::text AS last`,
    );
    return last;
  }
  /** The memories waiting in the queue, by id, with their leases. */
  async function queued() {
    const { rows } = await db.query<{
      id: string;
      claimed_until: Date | null;
      claim_token: string | null;
    }>(
      `SELECT row_id::text AS id, claimed_until, claim_token FROM embedding_queue
        WHERE source = 'memories' AND model = 'fake-embed' ORDER BY row_id`,
    );
    return rows;
  }
  /** The ids of the memories waiting, none of them leased. */
  async function waiting(): Promise<string[]> {
    const items = await queued();
    expect(
      items.filter((item) => item.claim_token !== null || item.claimed_until !== null),
    ).toEqual([]);
    return items.map((item) => item.id);
  }
  /** Runs `worker` with the provider failing: what is new is queued, and waits, its lease given back. */
  async function queuedNotEmbedded(worker: Instance): Promise<string[]> {
    provider.failWith(503);
    try {
      await worker.run();
    } finally {
      provider.failWith(null);
    }
    return waiting();
  }
  async function count(query: string): Promise<number> {
    const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${query}`);
    return rows[0].n;
  }
  /** The worker's sessions left in a transaction (the service's other workers run beside it). */
  const idleInTransaction = () =>
    count(`pg_stat_activity WHERE datname = current_database() AND state = 'idle in transaction'
             AND query ILIKE '%embedding%'`);
  const requested = (n: number) =>
    eventually(
      () => (provider.requests.length >= n ? true : undefined),
      () => `${n} provider requests (${provider.requests.length} so far)`,
    );
  /** A run left waiting on the provider: awaited by the test, or by afterAll should it fail. */
  function started(run: Promise<void>): Promise<void> {
    pending.push(run);
    return run;
  }

  let a: Instance;
  let b: Instance;
  let runA: Promise<void>;
  let batch: string[];

  it('holds no transaction and no lock while the provider answers: a lease on the queued items instead', async () => {
    const last = await newMemories(6);
    a = instance();
    provider.hold();
    runA = started(a.run());
    await requested(1);
    batch = provider.requests[0].input;
    expect(batch).toHaveLength(6);
    // The provider takes its time: no connection of the service waits in a transaction meanwhile.
    for (let i = 0; i < 5; i += 1) {
      expect(await idleInTransaction()).toBe(0);
      await sleep(100);
    }
    // Neither the cursor's row nor the items are locked (NOWAIT would fail); the items are
    // leased for LEASE_MS from the claim, all six under one token.
    await db.query('BEGIN');
    try {
      await db.query(`SELECT 1 FROM embedding_cursors WHERE source = 'memories' FOR UPDATE NOWAIT`);
      await db.query(`SELECT 1 FROM embedding_queue FOR UPDATE NOWAIT`);
    } finally {
      await db.query('COMMIT');
    }
    const leased = await queued();
    expect(leased).toHaveLength(6);
    expect(leased[5].id).toBe(last);
    expect(leased[0].claim_token).not.toBeNull();
    expect(new Set(leased.map((item) => item.claim_token)).size).toBe(1);
    expect(leased[0].claimed_until!.getTime()).toBeGreaterThan(a.clock.nowMs() + LEASE_MS - 60_000);
    expect(leased[0].claimed_until!.getTime()).toBeLessThanOrEqual(a.clock.nowMs() + LEASE_MS);
    expect(provider.requests[0].answered).toBe(false);
  });

  it('another instance skips a live lease, takes an expired one over, and the late holder moves nothing', async () => {
    b = instance();
    // Live: B claims nothing and sends nothing.
    await b.run();
    expect(provider.requests).toHaveLength(1);
    expect(await count('memory_embeddings')).toBe(0);
    // Expired by B's clock: B takes the same batch over.
    b.clock.advance(LEASE_MS + 1_000);
    const runB = started(b.run());
    await requested(2);
    expect(provider.requests[1].input).toEqual(batch);
    expect(b.warnings).toContain('embedding lease expired: taking the batch over');
    provider.open();
    provider.release(1);
    await runB;
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(6);
    // B goes on past the batch A still holds.
    await newMemories(4);
    await b.run();
    expect(provider.requests).toHaveLength(3);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(10);

    // A's answer comes at last: its lease is gone, so it stores nothing (the same vectors
    // stored again would not change the count: no row version changes either).
    const versions = () =>
      db.query('SELECT memory_id, xmin::text FROM memory_embeddings ORDER BY memory_id');
    const stored = (await versions()).rows;
    provider.release(0);
    await runA;
    expect((await versions()).rows).toEqual(stored);
    expect(a.warnings).toContain(
      'embedding lease expired before the batch was stored: another instance took it over',
    );
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(10);
    expect(await idleInTransaction()).toBe(0);
  });

  it('a failed provider call gives the lease back: the retry after the backoff takes the batch', async () => {
    const c = instance();
    const last = await newMemories(2);
    provider.failWith(503);
    const sent = provider.requests.length;
    await c.run();
    // The batch, then the probe: failing too, the provider is at fault, not a text.
    expect(provider.requests.slice(sent).map((request) => request.input)).toEqual([
      [expect.any(String), expect.any(String)],
      ['Hello.'],
    ]);
    expect(c.warnings).toContain('embeddings provider failed: retrying later');
    expect(await waiting()).toHaveLength(2);
    expect((await waiting())[1]).toBe(last);
    provider.failWith(null);
    // Within the backoff: nothing tried.
    await c.run();
    expect(provider.requests).toHaveLength(sent + 2);
    // Past the longest backoff (a minute), well within a lease that had been kept (two).
    c.clock.advance(60_000);
    await c.run();
    expect(provider.requests).toHaveLength(sent + 3);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(12);
  });

  it('a refused batch: a probe the provider embeds, then its texts one by one while the lease can still be kept; the batch stored as far as it got', async () => {
    const d = instance();
    const texts = [
      'First of four.',
      'Second of four.',
      'Third of four, REFUSED.',
      'Fourth of four.',
    ];
    const last = await newMemories(texts);
    const { rows: ids } = await db.query<{ id: string }>(
      'SELECT id::text FROM memories WHERE content = ANY($1) ORDER BY id',
      [texts],
    );
    provider.refuse('REFUSED');
    provider.hold();
    const sent = provider.requests.length;
    const run = started(d.run());
    // The batch's call, refused; a text any provider embeds, embedded: the texts are at fault.
    await requested(sent + 1);
    expect(provider.requests[sent].input).toEqual(texts);
    provider.release(sent);
    await requested(sent + 2);
    expect(provider.requests[sent + 1].input).toEqual(['Hello.']);
    provider.release(sent + 1);
    await requested(sent + 3);
    expect(provider.requests[sent + 2].input).toEqual([texts[0]]);
    // A call takes up to 30 s, and must end 30 s before the lease does: none starts past 60 s.
    d.clock.advance(LEASE_MS / 2 + 1);
    provider.open();
    provider.release(sent + 2);
    await run;
    expect(provider.requests).toHaveLength(sent + 3);
    // The first stored; the rest wait, their lease given back.
    expect(await waiting()).toEqual(ids.slice(1).map((row) => row.id));
    // The next run takes the rest, and skips the refused text alone.
    await d.run();
    expect(provider.requests.slice(sent + 3).map((request) => request.input)).toEqual([
      texts.slice(1),
      ['Hello.'],
      [texts[1]],
      [texts[2]],
      [texts[3]],
    ]);
    expect(await queued()).toEqual([]);
    expect(ids[3].id).toBe(last);
    expect(await count('memory_embeddings')).toBe(15);
    expect(d.warnings).toEqual(['text refused by the embeddings provider: skipped']);
    provider.refuse(null);
  });

  it('a refused batch of more than 8 is sent again in halves until the refused text is alone', async () => {
    const g = instance();
    const texts = Array.from({ length: 10 }, (_, i) =>
      i === 7 ? `Halves ${i}, REFUSED.` : `Halves ${i}.`,
    );
    await newMemories(texts);
    const sent = provider.requests.length;
    provider.refuse('REFUSED');
    try {
      await g.run();
    } finally {
      provider.refuse(null);
    }
    expect(provider.requests.slice(sent).map((request) => request.input)).toEqual([
      texts,
      ['Hello.'],
      texts.slice(0, 5),
      texts.slice(5),
      ...texts.slice(5).map((text) => [text]),
    ]);
    expect(await queued()).toEqual([]);
    expect(g.warnings).toEqual(['text refused by the embeddings provider: skipped']);
  });

  it('a batch whose every text is refused, by a provider that embeds others, is skipped: the queue goes on', async () => {
    const h = instance();
    const texts = ['Only REFUSED texts here.', 'And this one REFUSED too.'];
    await newMemories(texts);
    const stored = await count('memory_embeddings');
    provider.refuse('REFUSED');
    try {
      await h.run();
    } finally {
      provider.refuse(null);
    }
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored);
  });

  it('a batch the provider refuses with every other text (a key, a model) is retried with backoff, not skipped', async () => {
    const e = instance();
    const texts = ['Refused with the rest.', 'Refused like any text.'];
    await newMemories(texts);
    const stored = await count('memory_embeddings');
    provider.refuse('');
    try {
      await e.run();
      expect(e.warnings).toContain('embeddings provider failed: retrying later');
      expect(await waiting()).toHaveLength(2);
      expect(await count('memory_embeddings')).toBe(stored);
    } finally {
      provider.refuse(null);
    }
    // Past the backoff, the provider taking them: embedded, none lost.
    e.clock.advance(60_000);
    await e.run();
    expect(await count('memory_embeddings')).toBe(stored + 2);
  });

  it("a text the provider answers 500 alone, while it embeds the probe, waits on its own: the rest of the batch and every organization's next items go on (review)", async () => {
    const w = instance();
    const poisoned = 'A message the provider chokes on, POISON.';
    await newMemories([poisoned]);
    const others = ['Another tenant, first.', 'Another tenant, second.'];
    await newMemories(others, other);
    const { rows: poison } = await db.query<{ id: string }>(
      'SELECT id::text FROM memories WHERE content = $1',
      [poisoned],
    );
    const deferred = async () =>
      (
        await db.query<{
          attempts: number;
          claimed_until: Date | null;
          claim_token: string | null;
        }>(
          `SELECT attempts, claimed_until, claim_token FROM embedding_queue
            WHERE source = 'memories' AND row_id = $1`,
          [poison[0].id],
        )
      ).rows;
    const stored = await count('memory_embeddings');
    provider.failOn('POISON');
    try {
      const sent = provider.requests.length;
      await w.run();
      // The batch fails; the probe is embedded; the texts one by one (in the batch's order of
      // organizations), the failing one followed by the probe again: the provider still works.
      const batch = provider.requests[sent].input;
      expect([...batch].sort()).toEqual([poisoned, ...others].sort());
      expect(provider.requests.slice(sent + 1).map((request) => request.input)).toEqual([
        ['Hello.'],
        ...batch.flatMap((text) => (text === poisoned ? [[text], ['Hello.']] : [[text]])),
      ]);
      expect(await count('memory_embeddings')).toBe(stored + 2);
      expect(w.warnings).toEqual([
        'text failing alone at the embeddings provider: it waits on its own',
      ]);
      expect(await deferred()).toEqual([
        {
          attempts: 1,
          claimed_until: new Date(w.clock.nowMs() + DEFERRED_FIRST_MS),
          claim_token: null,
        },
      ]);
      // Its organization's next memory is embedded meanwhile, with no call for the one waiting.
      await newMemories(['Written after the poison.']);
      const before = provider.requests.length;
      await w.run();
      expect(provider.requests.slice(before).map((request) => request.input)).toEqual([
        ['Written after the poison.'],
      ]);
      // Its own time come, it is drawn alone (the probe once), even with another memory
      // waiting beside it, which the next batch takes; and it waits twice as long.
      await newMemories(['Waiting beside it.']);
      w.clock.advance(DEFERRED_FIRST_MS);
      const again = provider.requests.length;
      await w.run();
      expect(provider.requests.slice(again).map((request) => request.input)).toEqual([
        [poisoned],
        ['Hello.'],
        ['Waiting beside it.'],
      ]);
      expect(await deferred()).toEqual([
        {
          attempts: 2,
          claimed_until: new Date(w.clock.nowMs() + 2 * DEFERRED_FIRST_MS),
          claim_token: null,
        },
      ]);
      // At its last try, it is passed over: findable by its words, as a refused text.
      await db.query(
        'UPDATE embedding_queue SET attempts = $1, claimed_until = NULL WHERE row_id = $2',
        [DEFERRALS_MAX - 1, poison[0].id],
      );
      await w.run();
      expect(await deferred()).toEqual([]);
      expect(w.warnings.at(-1)).toBe(
        `text failing alone at the embeddings provider ${DEFERRALS_MAX} times: skipped`,
      );
      expect(await queued()).toEqual([]);
      expect(await count('memory_embeddings')).toBe(stored + 4);
    } finally {
      provider.failOn(null);
    }
  });

  it('a text the provider hangs on until the timeout, in a batch of more than 8: the others one by one, the hanging one waits on its own, in one run (review)', async () => {
    const sent: string[][] = [];
    // The provider as the worker meets it: a call holding the text runs out its 30 s.
    const hanging = (clock: ManualClock) => {
      const real = app.app.get(Embedder);
      return Object.assign(Object.create(real) as Embedder, {
        embed: (texts: readonly string[]) => {
          sent.push([...texts]);
          if (texts.some((text) => text.includes('HANG'))) {
            clock.advance(BATCH_TIMEOUT_MS);
            return Promise.reject(new APIConnectionTimeoutError());
          }
          return Promise.resolve(texts.map((text) => fakeEmbedding(text)));
        },
      });
    };
    const h = instance(hanging);
    const texts = Array.from({ length: 10 }, (_, i) =>
      i === 2 ? `Hangs ${i}, HANG.` : `Hangs ${i}.`,
    );
    await newMemories(texts);
    const stored = await count('memory_embeddings');
    await h.run();
    // Before, halves: the batch, its half and its quarter each ran out 30 s, the lease's time
    // was gone before the text was sent alone, and the same batch came back at every run.
    expect(sent).toEqual([
      texts,
      ['Hello.'],
      [texts[0]],
      [texts[1]],
      [texts[2]],
      ['Hello.'],
      ...texts.slice(3).map((text) => [text]),
    ]);
    expect(await count('memory_embeddings')).toBe(stored + 9);
    const { rows } = await db.query<{ attempts: number }>(
      `SELECT attempts FROM embedding_queue WHERE source = 'memories'`,
    );
    expect(rows).toEqual([{ attempts: 1 }]);
    await db.query(`DELETE FROM embedding_queue WHERE source = 'memories'`);
  });

  it('a 429 among the parts of a refused batch keeps what was answered, and backs off', async () => {
    const k = instance();
    const texts = ['Kept before the limit.', 'Refused, REFUSED.', 'Throttled THROTTLED.'];
    await newMemories(texts);
    const { rows: ids } = await db.query<{ id: string }>(
      'SELECT id::text FROM memories WHERE content = ANY($1) ORDER BY id',
      [texts],
    );
    provider.refuse('REFUSED');
    provider.throttle('THROTTLED');
    try {
      await k.run();
      expect(k.warnings).toContain('embeddings provider failed: retrying later');
      // The first text stored, the refused one passed over; the throttled one waits.
      expect(await waiting()).toEqual([ids[2].id]);
      // Within the backoff: nothing tried.
      const sent = provider.requests.length;
      await k.run();
      expect(provider.requests).toHaveLength(sent);
    } finally {
      provider.refuse(null);
      provider.throttle(null);
    }
    k.clock.advance(60_000);
    await k.run();
    expect(await queued()).toEqual([]);
  });

  it(`sends at most ${BATCH_MAX_CHARACTERS} characters a call, and goes on with the rest in the same run`, async () => {
    const f = instance();
    // Ten long messages: eight fill a call (the first whatever its length).
    const texts = Array.from({ length: 10 }, (_, i) => `${i} ${'long words '.repeat(700)}`);
    await newMemories(texts);
    const sent = provider.requests.length;
    const stored = await count('memory_embeddings');
    await f.run();
    const calls = provider.requests.slice(sent).map((request) => request.input);
    expect(calls.map((input) => input.length)).toEqual([8, 2]);
    expect(calls.flat()).toEqual(texts);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 10);
  });

  it('a failed store gives the lease back too: no instance waits out the lease', async () => {
    const c = instance();
    const last = await newMemories(2);
    const stored = await count('memory_embeddings');
    await refusingWrites(
      (text) => db.query(text),
      { table: 'memory_embeddings', operation: 'INSERT', message: 'store refused by the test' },
      () => c.run(),
    );
    expect(c.warnings).toContain('embedding batch not stored: retrying later');
    expect(await waiting()).toHaveLength(2);
    expect((await waiting())[1]).toBe(last);
    // Another instance takes the batch at once, not a lease later.
    const d = instance();
    await d.run();
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 2);
  });
  it('passes over a memory an open transaction is deleting, and stores the rest of the batch without waiting for it', async () => {
    const c = instance();
    const last = await newMemories(3);
    const stored = await count('memory_embeddings');
    const deleting = await HeldTransaction.begin(database.url);
    try {
      // What an erasure's batch holds until it commits (seconds, for a heavy end user).
      await deleting.run('DELETE FROM memories WHERE id = $1', [last]);
      const run = c.run();
      const finished = await Promise.race([run.then(() => true), sleep(3_000).then(() => false)]);
      await deleting.commit();
      await run;
      // Before, the store waited for the deletion, holding the cursor's row (every instance's
      // embedding with it), and failed on the statement timeout as a provider failure.
      expect(finished).toBe(true);
    } finally {
      await deleting.end();
    }
    expect(c.warnings).toEqual([]);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 2);
    expect(await count(`memory_embeddings WHERE memory_id = ${last}`)).toBe(0);
  });

  it('never sends a memory that only asks: it leaves the queue, and a batch of questions alone costs no call', async () => {
    const e = instance();
    const sent = provider.requests.length;
    const stored = await count('memory_embeddings');
    const statement = `My car is an old blue Volvo, note ${Date.now()}.`;
    await newMemories(['What kind of car do I drive?', statement, 'Is it blue?']);
    await e.run();
    expect(provider.requests.slice(sent).map((request) => request.input)).toEqual([[statement]]);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 1);

    const questionsOnly = await newMemories(['Where do I live?', 'How old is my cat?']);
    await e.run();
    expect(provider.requests).toHaveLength(sent + 1);
    expect(await queued()).toEqual([]);
    expect(
      await count(`embedding_cursors WHERE source = 'memories' AND position >= ${questionsOnly}`),
    ).toBe(1);
    expect(await count('memory_embeddings')).toBe(stored + 1);
  });
  it("draws each batch organization by organization: another tenant's memory waits for one batch, not for an import, and a second instance draws the next batch meanwhile", async () => {
    // A tenant's import of 30 (three batches), then another tenant's one memory.
    const imported = Array.from({ length: 30 }, (_, i) => `Imported note ${i} of ${Date.now()}.`);
    await newMemories(imported);
    const single = `The other tenant's only note, ${Date.now()}.`;
    await newMemories([single], other);
    const stored = await count('memory_embeddings');
    const from = provider.requests.length;
    provider.hold();
    const first = instance();
    const second = instance();
    const runs = [started(first.run())];
    await requested(from + 1);
    // Before, one cursor in id order: the first three batches the import's, the fourth this one.
    // (In rounds: which organization comes first goes by their ids.)
    expect([...provider.requests[from].input].sort()).toEqual(
      [single, ...imported.slice(0, 9)].sort(),
    );
    // The first batch's lease is live: the second instance draws the next, not nothing.
    runs.push(started(second.run()));
    await requested(from + 2);
    expect(provider.requests[from + 1].input).toEqual(imported.slice(9, 19));
    provider.open();
    provider.releaseAll();
    await Promise.all(runs);
    expect([...first.warnings, ...second.warnings]).toEqual([]);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 31);
    // Each text sent once, by one instance or the other.
    const sent = provider.requests.slice(from).flatMap((request) => request.input);
    expect(sent.sort()).toEqual([single, ...imported].sort());
  });

  it("rotates each batch's turns past the last organization it served: eight tenants' long messages ahead by id hold back a ninth's memory one batch, not until their backlogs are done", async () => {
    provider.open();
    const tenants: { auth: string; personalityId: string; organizationId: string }[] = [];
    for (let i = 0; i < 9; i += 1) {
      const tenant = await tenantWithKey(app, ['read_write']);
      tenants.push({
        auth: tenant.auth,
        personalityId: await clonePersonality(app, tenant.auth),
        organizationId: tenant.organizationId,
      });
    }
    tenants.sort((x, y) => (x.organizationId < y.organizationId ? -1 : 1));
    // Three messages of about 8,000 characters each for the eight first by id: eight fill a call
    // (BATCH_MAX_CHARACTERS); then one short memory of the last.
    for (let i = 0; i < 8; i += 1) {
      await newMemories(
        [0, 1, 2].map((k) => `${i}-${k} ${'long words '.repeat(800)}`.slice(0, 7_996)),
        tenants[i],
      );
    }
    const single = `The ninth tenant's only note, ${Date.now()}.`;
    await newMemories([single], tenants[8]);
    const from = provider.requests.length;
    await instance().run();
    const calls = provider.requests.slice(from).map((request) => request.input);
    expect(calls.map((input) => input.length)).toEqual([8, 8, 8, 1].slice(0, calls.length));
    // Before, every batch's turns began at the first by id: the note came in the fourth call.
    expect(calls.findIndex((input) => input.includes(single))).toBe(1);
    expect(await queued()).toEqual([]);
  });

  it("a second instance draws the organizations whose items the first's batch has not leased: twenty tenants' single memories, two batches at once", async () => {
    provider.open();
    const texts: string[] = [];
    for (let i = 0; i < 20; i += 1) {
      const tenant = await tenantWithKey(app, ['read_write']);
      const text = `Tenant ${i}'s single note, ${Date.now()}.`;
      texts.push(text);
      await newMemories([text], {
        auth: tenant.auth,
        personalityId: await clonePersonality(app, tenant.auth),
      });
    }
    provider.hold();
    const from = provider.requests.length;
    const runs = [started(instance().run())];
    await requested(from + 1);
    expect(provider.requests[from].input).toHaveLength(10);
    // Before, the second's turns were the first ten organizations again, all leased: no call.
    runs.push(started(instance().run()));
    await requested(from + 2);
    const [first, second] = provider.requests.slice(from, from + 2).map((r) => r.input);
    expect([...first, ...second].sort()).toEqual([...texts].sort());
    provider.open();
    provider.releaseAll();
    await Promise.all(runs);
    expect(await queued()).toEqual([]);
  });

  it('drops the items whose memories were deleted before their batch, and goes on in the same run', async () => {
    const c = instance();
    const texts = Array.from({ length: 12 }, (_, i) => `Deleted later ${i} of ${Date.now()}.`);
    await newMemories(texts);
    // Queued, the first batch failed and given back: all twelve wait.
    const ids = await queuedNotEmbedded(c);
    expect(ids).toHaveLength(12);
    // Ten deleted (a forgetting, an erasure) while they wait: the next batch drawn is theirs alone.
    await db.query('DELETE FROM memories WHERE id = ANY($1::bigint[])', [ids.slice(0, 10)]);
    const from = provider.requests.length;
    const stored = await count('memory_embeddings');
    c.clock.advance(60_000);
    await c.run();
    expect(provider.requests.slice(from).map((request) => request.input)).toEqual([
      texts.slice(10),
    ]);
    expect(await queued()).toEqual([]);
    expect(await count('memory_embeddings')).toBe(stored + 2);
  });

  /** A new document of these paragraphs (one chunk each), and the cursor's safe bound past it. */
  async function newDocument(title: string, paragraphs: string[]): Promise<void> {
    const created = await app
      .http()
      .post('/v1/knowledge')
      .set('Authorization', auth)
      .send({ title, content: paragraphs.join('\n\n') });
    expect(created.status).toBe(201);
    await db.query(
      `INSERT INTO embedding_cursors (source, model, safe_bound)
       SELECT 'knowledge_chunks', 'fake-embed', max(id) FROM knowledge_chunks
       ON CONFLICT (source, model) DO UPDATE
         SET safe_bound = excluded.safe_bound, pending_bound = NULL, pending_xmax = NULL`,
    );
  }
  const sourcesAsked = (from: number) =>
    provider.requests
      .slice(from)
      .map(({ input }) => (input[0].includes('Lease note') ? 'memories' : 'knowledge'));

  it('waits for the chunks a content PATCH locks, and keeps: each is embedded, none passed over for good', async () => {
    const c = instance();
    await newDocument('Kept by a patch', [
      'Alpha paragraph kept one.',
      'Beta paragraph kept two.',
      'Gamma paragraph kept three.',
    ]);
    const { rows: chunks } = await db.query<{ id: string }>(
      `SELECT k.id::text FROM knowledge_chunks k JOIN knowledge_documents d ON d.id = k.document_id
        WHERE d.title = 'Kept by a patch' ORDER BY k.id`,
    );
    expect(chunks.length).toBeGreaterThan(0);
    const patching = await HeldTransaction.begin(database.url);
    try {
      // What a content PATCH holds until it commits (knowledge.repository.ts, newChunkBytes).
      await patching.run(
        `SELECT FROM (SELECT FROM knowledge_chunks WHERE id = ANY($1::bigint[])
                       ORDER BY id FOR UPDATE) locked`,
        [chunks.map((chunk) => chunk.id)],
      );
      const run = c.run();
      // Before (SKIP LOCKED), nothing waited: the cursor passed the three, never embedded.
      await patching.untilWaitedOn();
      await patching.commit();
      await run;
    } finally {
      await patching.end();
    }
    expect(c.warnings).toEqual([]);
    expect(
      await count(
        `knowledge_chunk_embeddings WHERE chunk_id = ANY('{${chunks.map((chunk) => chunk.id).join(',')}}'::bigint[])`,
      ),
    ).toBe(chunks.length);
  });

  it('takes a batch of each source in turn: a source kept full holds back no other', async () => {
    provider.open();
    await newMemories(25);
    // 25 paragraphs too long to share a chunk (MAX_CHUNK_CHARS is 1,000): 25 chunks.
    const paragraphs = Array.from(
      { length: 25 },
      (_, i) =>
        `Handbook section ${i}. ${'The store opens at nine and closes at six. '.repeat(14)}`,
    );
    await newDocument('Handbook', paragraphs);
    const chunksEmbedded = await count('knowledge_chunk_embeddings');
    const from = provider.requests.length;
    await instance().run();
    // Before, a run embedded a source until it came back short: memories three times first.
    expect(sourcesAsked(from)).toEqual([
      'memories',
      'knowledge',
      'memories',
      'knowledge',
      'memories',
      'knowledge',
    ]);
    expect(await count('knowledge_chunk_embeddings')).toBe(chunksEmbedded + 25);
  });
  it('asks every source again each round: memories written while another is kept full are embedded in that run, once a poll interval has passed', async () => {
    const paragraphs = Array.from(
      { length: 25 },
      (_, i) =>
        `Policy section ${i}. ${'Returns are taken within thirty days of purchase. '.repeat(12)}`,
    );
    await newDocument('Policies', paragraphs);
    provider.hold();
    const from = provider.requests.length;
    const worker = instance();
    const run = started(worker.run());
    // No memory was waiting when the run began; three arrive while the chunks are embedded, and
    // a poll interval passes (a run queues new rows at its start, then once an interval).
    await requested(from + 1);
    await newMemories(3);
    worker.clock.advance(3_600_000);
    provider.open();
    provider.releaseAll();
    await run;
    // Before, a source that came back short was not asked again until the next run.
    expect(sourcesAsked(from)).toEqual(['knowledge', 'memories', 'knowledge', 'knowledge']);
  });
  it('a draw whose items another transaction holds locked ends the run, rather than drawing them again at once', async () => {
    const text = `Held by another instance's claim, ${Date.now()}.`;
    await newMemories([text]);
    // Queued, its first batch failed and given back.
    expect(await queuedNotEmbedded(instance())).toHaveLength(1);
    const d = instance();
    const from = provider.requests.length;
    const holding = await HeldTransaction.begin(database.url);
    try {
      // What another instance's claim or store holds while it runs.
      await holding.run('SELECT FROM embedding_queue FOR UPDATE');
      const run = started(d.run());
      const finished = await Promise.race([run.then(() => true), sleep(3_000).then(() => false)]);
      // Before, the run drew the same locked item again and again for as long as the lock
      // lasted (the reviewer counted 1,800 claims a second).
      expect(finished).toBe(true);
      expect(provider.requests).toHaveLength(from);
    } finally {
      await holding.commit();
      await holding.end();
    }
    await d.run();
    expect(provider.requests.slice(from).map((request) => request.input)).toEqual([[text]]);
    expect(await queued()).toEqual([]);
  });

  it("reverting the queue's migration moves the cursor back before the first row still waiting: the previous release embeds it", async () => {
    const texts = ['Waiting when the release went back.', 'Waiting too, after it.'];
    const last = await newMemories(texts);
    const c = instance();
    const ids = await queuedNotEmbedded(c);
    expect(ids).toHaveLength(2);
    expect(await count(`embedding_cursors WHERE source = 'memories' AND position >= ${last}`)).toBe(
      1,
    );
    const runner = app.app.get(DataSource).createQueryRunner();
    const migration = new QueueEmbeddingsByOrganization1795922600000();
    try {
      await runner.startTransaction();
      await migration.down(runner);
      const [cursor] = (await runner.query(
        `SELECT position::text FROM embedding_cursors WHERE source = 'memories'`,
      )) as Array<{ position: string }>;
      // The previous release embeds above the cursor: from the first waiting row on.
      expect(cursor.position).toBe(String(BigInt(ids[0]) - 1n));
      await migration.up(runner);
      await runner.commitTransaction();
    } finally {
      if (runner.isTransactionActive) await runner.rollbackTransaction();
      await runner.release();
    }
  });
});
