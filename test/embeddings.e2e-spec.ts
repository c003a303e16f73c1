import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { ErasureWorker } from '../src/end-users/erasure.worker';
import { Embedder } from '../src/embeddings/embedder';
import { onlyAsks } from '../src/embeddings/only-asks';
import { MetricsService } from '../src/metrics/metrics.service';
import { clonePersonality, importConversation, uniqueUserId } from './support/data-plane';
import { FakeEmbeddings } from './support/fake-embeddings';
import { tenantWithKey } from './support/identity';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

interface ScoredMemory {
  id: string;
  role: string;
  content: string;
  score: number;
}

const CRETE = 'We spent two weeks in Crete last summer.';
const PARAPHRASE = 'Where did I go on holiday?';
const CONVERSATION = [
  CRETE,
  'My sister plays the cello in an orchestra.',
  'The weather is grey and cold today.',
  'I am reading a very long novel.',
  'Coffee tastes better in the morning.',
];

/**
 * Recall by meaning (contract §27): memories embedded by a background worker on every instance,
 * search and recall merging the full-text and the embedding rankings, and a provider that fails
 * or is slow costing a reply nothing. The provider is test/support/fake-embeddings.ts, whose
 * embedder puts "holiday" and "Crete" on one concept.
 */
describe('Embeddings: recall by meaning (contract §27)', () => {
  const fake = new FakeEmbeddings();
  let db: Client;
  /** Without EMBEDDINGS_MODEL: as before embeddings, and the writer of the conversations. */
  let off: TestApp;
  /** Two instances with embeddings on, started once the first conversation is written. */
  let on: TestApp[] = [];
  let tenant: Tenant;
  let personalityId: string;
  const userId = uniqueUserId('embeddings');

  /**
   * A database of its own: the checks count every memory and embedding, and the other specs of
   * the run (some with embeddings on) leave theirs in the shared one.
   */
  let database: FreshDatabase;
  const common: Record<string, string> = { ENGINE_HISTORY_MESSAGES: '2', MEMORY_RECALL_LIMIT: '4' };
  const startOn = (env: Record<string, string> = {}) =>
    createTestApp({
      env: {
        ...common,
        EMBEDDINGS_MODEL: 'fake-embed',
        EMBEDDINGS_BASE_URL: fake.url,
        EMBEDDINGS_API_KEY: 'sk-embeddings',
        EMBEDDINGS_DIMENSIONS: '128',
        EMBEDDINGS_BATCH_SIZE: '3',
        EMBEDDINGS_POLL_INTERVAL_MS: '50',
        EMBEDDINGS_QUERY_TIMEOUT_MS: '500',
        ...env,
      },
    });

  beforeAll(async () => {
    await fake.start();
    database = await createFreshDatabase('embeddings', process.env.DATABASE_URL);
    common.DATABASE_URL = database.url;
    db = new Client({ connectionString: database.url });
    await db.connect();
    off = await createTestApp({ env: common });
    tenant = await tenantWithKey(off, ['read_write']);
    personalityId = await clonePersonality(off, tenant.auth);
    for (const message of CONVERSATION) {
      expect((await respond(off, userId, message)).status).toBe(200);
    }
    // More for the two workers to share, in batches of 3, of another end user.
    const busy = uniqueUserId('embeddings-busy');
    for (let i = 0; i < 12; i += 1) {
      expect((await respond(off, busy, `Note number ${i} about the garden.`)).status).toBe(200);
    }
    expect((await respond(off, busy, 'Is the garden ready for spring?')).status).toBe(200);
  });
  afterAll(async () => {
    for (const app of [...on, off]) await app.close();
    await db.end();
    await fake.stop();
    await database.drop();
  });

  function respond(app: TestApp, user: string, message: string) {
    return app
      .http()
      .post('/v1/respond')
      .set('Authorization', tenant.auth)
      .send({ personality_id: personalityId, user_id: user, message });
  }
  async function search(app: TestApp, user: string, q: string): Promise<ScoredMemory[]> {
    const response = await app
      .http()
      .get(`/v1/end-users/${encodeURIComponent(user)}/memories/search`)
      .query({ q, personality_id: personalityId })
      .set('Authorization', tenant.auth);
    expect(response.status).toBe(200);
    return response.body.data as ScoredMemory[];
  }
  /**
   * The first of `found` the end user said: a search puts ties newest first (contract §20), and
   * the local engine's later replies quote the statement, every word of it.
   */
  const firstSaid = (found: ScoredMemory[]) =>
    found.find((memory) => memory.role === 'user')?.content;
  async function count(query: string, values: unknown[] = []): Promise<number> {
    const { rows } = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${query}`,
      values,
    );
    return rows[0].n;
  }
  /** A counter's value, summed over the instances with embeddings on. */
  async function counted(name: string): Promise<number> {
    let total = 0;
    for (const app of on) {
      const metric = await app.app.get(MetricsService).registry.getSingleMetric(name)?.get();
      total += metric?.values.reduce((sum, value) => sum + value.value, 0) ?? 0;
    }
    return total;
  }
  /**
   * Every memory has its embedding but those the fake refuses and those that only ask (answers
   * how many there are).
   */
  const allEmbedded = () =>
    eventually(async () => {
      const { rows: missing } = await db.query<{ content: string }>(
        `SELECT m.content FROM memories m
          WHERE NOT EXISTS (SELECT 1 FROM memory_embeddings e WHERE e.memory_id = m.id)
            AND m.content NOT LIKE '%REFUSED%'`,
      );
      const owed = missing.filter((memory) => !onlyAsks(memory.content));
      return owed.length === 0 ? count('memory_embeddings') : undefined;
    }, 'every memory embedded');

  it('is off without EMBEDDINGS_MODEL: the paraphrase is not found, and nothing is sent or written', async () => {
    const found = await search(off, userId, PARAPHRASE);
    expect(found.map((memory) => memory.content)).not.toContain(CRETE);
    // The literal is found by its words, as before.
    expect(firstSaid(await search(off, userId, 'Crete'))).toBe(CRETE);
    expect(fake.requests).toHaveLength(0);
    expect(await count('memory_embeddings')).toBe(0);
    expect(await count('embedding_cursors')).toBe(0);
    expect(await count('embedding_queue')).toBe(0);
  });

  it('two instances embed each memory exactly once, in batches, with the configured model, key and dimensions', async () => {
    on = [await startOn(), await startOn()];
    const embedded = await allEmbedded();
    const { rows } = await db.query<{ content: string }>('SELECT content FROM memories');
    const telling = rows.map((row) => row.content).filter((content) => !onlyAsks(content));
    // The busy end user's question only asks: never sent.
    expect(telling.length).toBe(rows.length - 1);
    expect(embedded).toBe(telling.length);
    // Nothing has searched yet: every text the provider got is a memory's that tells, once.
    expect([...fake.inputs].sort()).toEqual(telling.sort());
    expect(fake.requests.every((request) => request.input.length <= 3)).toBe(true);
    expect(fake.requests.every((request) => request.model === 'fake-embed')).toBe(true);
    expect(fake.requests.every((request) => request.dimensions === 128)).toBe(true);
    const { rows: lengths } = await db.query<{ n: number }>(
      'SELECT DISTINCT array_length(embedding, 1) AS n FROM memory_embeddings',
    );
    expect(lengths).toEqual([{ n: 128 }]);
    expect(fake.requests.every((request) => request.authorization === 'Bearer sk-embeddings')).toBe(
      true,
    );
    // Stored with the model and the dimensions asked for: vectors of another kind are never compared.
    expect(await count('memory_embeddings WHERE model = $1', ['fake-embed/128'])).toBe(embedded);
    // Counted once each, just after its batch commits: the question passed over too.
    await eventually(
      async () => ((await counted('embeddings_embedded_total')) === rows.length ? true : undefined),
      'embeddings_embedded_total to count every memory once',
    );
  });

  it('a memory committed after a newer one is embedded too: ids are taken before commit', async () => {
    await allEmbedded();
    const user = uniqueUserId('embeddings-late');
    expect((await respond(off, user, 'First words.')).status).toBe(200);
    const {
      rows: [endUser],
    } = await db.query<{ id: string }>('SELECT id FROM end_users WHERE user_id = $1', [user]);
    const late = new Client({ connectionString: database.url });
    await late.connect();
    try {
      await late.query('BEGIN');
      const {
        rows: [held],
      } = await late.query<{ id: string }>(
        `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content)
         VALUES ($1, $2, $3, 'user', 'A late memory about a vacation.') RETURNING id::text`,
        [tenant.organizationId, endUser.id, personalityId],
      );
      expect((await respond(off, user, 'A newer memory, committed first.')).status).toBe(200);
      const {
        rows: [{ xid }],
      } = await late.query<{ xid: string }>('SELECT pg_current_xact_id()::text AS xid');
      // The workers wait for the open transaction: what they may read stops below its memory,
      // and the newer memory, committed, is not embedded before it.
      await eventually(async () => {
        const { rows } = await db.query(
          `SELECT 1 FROM embedding_cursors
            WHERE source = 'memories' AND pending_xmax > $1::bigint AND safe_bound < $2::bigint`,
          [xid, held.id],
        );
        return rows.length === 1 ? true : undefined;
      }, 'the cursor waiting for the open transaction');
      expect(
        await count(
          "memory_embeddings e JOIN memories m ON m.id = e.memory_id WHERE m.content = 'A newer memory, committed first.'",
        ),
      ).toBe(0);
      await late.query('COMMIT');
      await allEmbedded();
      expect(await count('memory_embeddings WHERE memory_id = $1', [held.id])).toBe(1);
    } finally {
      await late.end();
    }
  });

  it('search finds a paraphrase that shares no word, by meaning, and still finds words', async () => {
    const [first] = await search(on[0], userId, PARAPHRASE);
    expect(first.content).toBe(CRETE);
    expect(first.score).toBeGreaterThan(0);
    expect(fake.inputs).toContain(PARAPHRASE);
    expect((await search(on[1], userId, 'sister'))[0].content).toBe(CONVERSATION[1]);
    // Off, the same question over the same rows still finds nothing of Crete.
    expect((await search(off, userId, PARAPHRASE)).map((m) => m.content)).not.toContain(CRETE);
  });

  it('sends no question to the provider for an end user that does not exist', async () => {
    const question = `Where did nobody go on holiday ${randomUUID()}?`;
    const missing = await on[0]
      .http()
      .get(`/v1/end-users/${uniqueUserId('nobody')}/memories/search`)
      .query({ q: question })
      .set('Authorization', tenant.auth);
    expect(missing.status).toBe(404);
    // The same search of an end user who exists sends it: the check can fail.
    await search(on[0], userId, question);
    expect(fake.inputs.filter((input) => input === question)).toHaveLength(1);
  });

  it('compares whole vectors as real[] unless the database has pgvector (PGlite has: services/pgvector)', async () => {
    const installed = await count(`pg_extension WHERE extname = 'vector'`);
    const columns = await count(
      `pg_attribute WHERE attrelid IN ('memory_embeddings'::regclass, 'knowledge_chunk_embeddings'::regclass)
          AND attname = 'vector'`,
    );
    expect(columns).toBe(installed * 2);
    expect((await on[0].app.get(Embedder).embedQuery(randomUUID(), PARAPHRASE))?.wholeVectors).toBe(
      installed ? 'pgvector' : 'array',
    );
  });

  it('reaches a memory stated 600 messages before by its sketch, within EMBEDDINGS_CANDIDATES', async () => {
    // Whole vectors are compared only for the nearest 50 or so by sketch; before sketches the
    // latest 500 were, and Crete, the oldest of 601, was out of reach.
    const long = uniqueUserId('embeddings-long');
    const chatter = Array.from(
      { length: 600 },
      (_, i) => `Entry ${i}: ${['quill', 'marble', 'lantern', 'thistle', 'copper'][i % 5]}${i}.`,
    );
    await importConversation(off, tenant.auth, personalityId, long, [CRETE, ...chatter]);
    // Sends batches of 200 beside the two slow instances, and compares the latest 100 only.
    const narrow = await startOn({ EMBEDDINGS_BATCH_SIZE: '200', EMBEDDINGS_CANDIDATES: '100' });
    try {
      await allEmbedded();
      // Each sketch is its embedding's, set by the table's trigger (the worker writes none).
      expect(await count('memory_embeddings WHERE sketch <> embedding_sketch(embedding)')).toBe(0);
      const found = await search(on[0], long, PARAPHRASE);
      expect(found[0].content).toBe(CRETE);
      expect(found[0].score).toBeGreaterThan(0);
      // The bound holds: among the latest 100 only, Crete is out of reach.
      expect((await search(narrow, long, PARAPHRASE)).map((m) => m.content)).not.toContain(CRETE);
    } finally {
      await narrow.close();
    }
  });

  it("recall brings the paraphrase's memory into the reply (the local engine quotes it)", async () => {
    const other = uniqueUserId('embeddings-recall');
    for (const message of CONVERSATION) {
      expect((await respond(off, other, message)).status).toBe(200);
    }
    const lexical = await respond(off, other, PARAPHRASE);
    expect(lexical.status).toBe(200);
    expect(lexical.body.reply.text).not.toContain('Crete');
    await allEmbedded();
    const reply = await respond(on[0], other, PARAPHRASE);
    expect(reply.status).toBe(200);
    expect(reply.body.reply.text).toContain('Crete');
  });

  it('a text the provider refuses (400) is skipped alone: the others are embedded, it leaves the queue', async () => {
    await allEmbedded();
    const user = uniqueUserId('embeddings-refused');
    const refused = 'This one is REFUSED by the provider.';
    fake.refuse('REFUSED');
    try {
      expect((await respond(off, user, 'Before the refused one.')).status).toBe(200);
      expect((await respond(off, user, refused)).status).toBe(200);
      // A batch of refused texts alone is retried (the next test): skipped beside one it takes.
      expect((await respond(off, user, 'After the refused one.')).status).toBe(200);
      const {
        rows: [{ id: refusedId, last }],
      } = await db.query<{ id: string; last: string }>(
        `SELECT (SELECT id::text FROM memories WHERE content = $1) AS id,
                (SELECT max(id)::text FROM memories) AS last`,
        [refused],
      );
      // Passed over: every memory but it (and the reply quoting it) is embedded, none waits.
      await eventually(async () => {
        const { rows } = await db.query(
          `SELECT 1 FROM embedding_cursors WHERE source = 'memories' AND position >= $1::bigint
              AND NOT EXISTS (SELECT 1 FROM embedding_queue
                               WHERE source = 'memories' AND row_id <= $1::bigint)`,
          [last],
        );
        return rows.length === 1 ? true : undefined;
      }, 'the refused memory passed over');
      expect(await count('memory_embeddings WHERE memory_id = $1', [refusedId])).toBe(0);
      const { rows: embedded } = await db.query<{ content: string }>(
        `SELECT m.content FROM memories m JOIN end_users e ON e.id = m.end_user_id
           JOIN memory_embeddings x ON x.memory_id = m.id WHERE e.user_id = $1`,
        [user],
      );
      expect(embedded.map((row) => row.content)).toEqual(
        expect.arrayContaining(['Before the refused one.', 'After the refused one.']),
      );
      expect(embedded.every((row) => !row.content.includes('REFUSED'))).toBe(true);
      // Still found by its words.
      expect((await search(on[0], user, 'refused provider')).map((m) => m.content)).toContain(
        refused,
      );
    } finally {
      fake.refuse(null);
    }
  });

  it.each([
    ['refuses every text of a batch (400)', () => fake.refuse('')],
    ['refuses the key (401)', () => fake.failWith(401)],
    ['knows no such model (404)', () => fake.failWith(404)],
    ['answers other dimensions than those asked', () => fake.answerDimensions(64)],
  ])(
    'a provider that %s is retried: no text is skipped, every one embedded once it recovers',
    async (_, fail) => {
      await allEmbedded();
      const user = uniqueUserId('embeddings-provider-refusing');
      const statement = `I keep ${randomUUID()} bees on the roof.`;
      fail();
      try {
        expect((await respond(off, user, statement)).status).toBe(200);
        await eventually(
          () =>
            fake.requests.filter((r) => r.input.includes(statement)).length >= 3 ? true : undefined,
          'three attempts at the new memory',
        );
        // Not passed over: still waiting in the queue.
        const { rows } = await db.query<{ waiting: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM embedding_queue q
                           WHERE q.source = 'memories' AND q.row_id = m.id) AS waiting
             FROM memories m WHERE m.content = $1`,
          [statement],
        );
        expect(rows).toEqual([{ waiting: true }]);
      } finally {
        fake.refuse(null);
        fake.recover();
      }
      await allEmbedded();
      expect(
        await count(
          'memory_embeddings e JOIN memories m ON m.id = e.memory_id WHERE m.content = $1',
          [statement],
        ),
      ).toBe(1);
    },
  );

  it('a failing provider is retried with backoff; replies and searches go on by words meanwhile', async () => {
    // Memories are embedded in id order: the new one is the next to embed.
    await allEmbedded();
    fake.failWith(503);
    const failedBefore = fake.requests.filter((request) => request.status === 503).length;
    const user = uniqueUserId('embeddings-failing');
    const statement = 'I adopted a greyhound called Comet.';
    expect((await respond(off, user, statement)).status).toBe(200);
    // The worker tries, fails, and tries again.
    await eventually(
      () =>
        fake.requests.filter((r) => r.status === 503 && r.input.includes(statement)).length >= 2
          ? true
          : undefined,
      'two failed attempts at the new memory',
    );
    expect(fake.requests.filter((r) => r.status === 503).length).toBeGreaterThan(failedBefore + 1);
    // The provider records a request before the worker has its answer and counts the failure.
    await eventually(
      async () => ((await counted('embeddings_worker_failures_total')) >= 2 ? true : undefined),
      'two failed runs counted',
    );
    const reply = await respond(on[0], user, 'Comet says hello');
    expect(reply.status).toBe(200);
    expect(firstSaid(await search(on[1], user, 'greyhound'))).toBe(statement);
    expect(
      await count(
        'memory_embeddings e JOIN memories m ON m.id = e.memory_id WHERE m.content = $1',
        [statement],
      ),
    ).toBe(0);

    fake.recover();
    await allEmbedded();
    // Found by meaning: the statement, and the reply that quoted it.
    const found = await search(on[0], user, 'Do I have a pet?');
    expect(found.slice(0, 2).map((memory) => memory.content)).toContain(statement);
  });

  // The SDK's own timeout ends when the headers arrive: the body is bounded too.
  it.each([
    ['answers late', (ms: number) => fake.delay(ms)],
    ['sends its headers and stalls the body', (ms: number) => fake.delayBody(ms)],
  ])(
    'a provider that %s: search answers by words within EMBEDDINGS_QUERY_TIMEOUT_MS',
    async (_, slow) => {
      slow(5_000);
      try {
        const started = Date.now();
        const found = await search(on[0], userId, 'sister');
        expect(Date.now() - started).toBeLessThan(3_000);
        expect(firstSaid(found)).toBe(CONVERSATION[1]);
      } finally {
        fake.recover();
      }
    },
  );

  it('a provider answering an index that is not one of the texts: search and replies go on by words', async () => {
    // One text sent, its vector answered at index 7: a hole where the question's vector goes.
    fake.answerIndexes((index) => index + 7);
    try {
      expect(firstSaid(await search(on[0], userId, 'sister'))).toBe(CONVERSATION[1]);
      fake.answerIndexes(() => 'first');
      expect(firstSaid(await search(on[1], userId, 'sister'))).toBe(CONVERSATION[1]);
      const user = uniqueUserId('embeddings-indexes');
      expect((await respond(on[1], user, 'Tell me about my sister')).status).toBe(200);
    } finally {
      fake.recover();
    }
  });

  it('a memory the provider keeps failing on (503) waits on its own: the memories after it and the knowledge worker go on', async () => {
    await allEmbedded();
    fake.refuse('POISON', 503);
    try {
      const user = uniqueUserId('embeddings-poison');
      expect((await respond(off, user, 'This POISON memory fails each time.')).status).toBe(200);
      await eventually(
        async () =>
          (await count(
            `embedding_queue q JOIN memories m ON m.id = q.row_id
              WHERE q.source = 'memories' AND q.attempts > 0 AND m.content LIKE '%POISON%'`,
          )) > 0
            ? true
            : undefined,
        'the memory failing alone, waiting on its own',
      );
      // Before, the memories' worker backed off as a whole, for every tenant.
      expect((await respond(off, user, 'Written after the failing one.')).status).toBe(200);
      await eventually(
        async () =>
          (await count(
            `memory_embeddings e JOIN memories m ON m.id = e.memory_id
              WHERE m.content = 'Written after the failing one.'`,
          )) > 0
            ? true
            : undefined,
        'the next memory embedded',
      );
      const upload = await on[0]
        .http()
        .post('/v1/knowledge')
        .set('Authorization', tenant.auth)
        .send({ title: 'Opening hours', content: 'The shop opens at nine on weekdays.' });
      expect(upload.status).toBe(201);
      await eventually(
        async () =>
          (await count('knowledge_chunk_embeddings WHERE document_id = $1', [upload.body.id])) > 0
            ? true
            : undefined,
        "the document's chunk embedded",
      );
    } finally {
      fake.refuse(null);
      // Its own wait cut short: the provider now embeds it, and the next test waits for all.
      await db.query('UPDATE embedding_queue SET claimed_until = NULL WHERE attempts > 0');
    }
  });

  it('embeddings go with a forgotten memory and an erased end user, and are never exported', async () => {
    await allEmbedded();
    const exported = await on[0]
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/export`)
      .set('Authorization', tenant.auth);
    expect(exported.status).toBe(200);
    expect(exported.text).toContain('Crete');
    // The user_id holds the word: no key or value of the document is an embedding.
    expect(exported.text).not.toMatch(/"embedding"/);

    const [crete] = await search(on[0], userId, 'Crete');
    const forgotten = await on[0]
      .http()
      .delete(`/v1/end-users/${encodeURIComponent(userId)}/memories/${crete.id}`)
      .set('Authorization', tenant.auth);
    expect(forgotten.status).toBe(204);
    expect(await count('memory_embeddings WHERE memory_id = $1', [crete.id])).toBe(0);

    const { rows } = await db.query<{ id: string }>(
      'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
      [tenant.organizationId, userId],
    );
    const endUserId = rows[0].id;
    expect(await count('memory_embeddings WHERE end_user_id = $1', [endUserId])).toBeGreaterThan(0);
    await db.query(
      `UPDATE end_users SET status = 'deleting', erase_after = now() - interval '1 minute' WHERE id = $1`,
      [endUserId],
    );
    // The other instance's erasure timer may hold the end user (SKIP LOCKED) when this one asks:
    // both are asked until the end user is gone.
    await eventually(async () => {
      for (const instance of on) await instance.app.get(ErasureWorker).eraseDue();
      return (await count('end_users WHERE id = $1', [endUserId])) === 0 ? true : undefined;
    }, 'the end user to be erased');
    expect(await count('memory_embeddings WHERE end_user_id = $1', [endUserId])).toBe(0);
  });
});
