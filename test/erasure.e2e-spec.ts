import { DataSource } from 'typeorm';
import { ERASED_ROWS_PER_TRANSACTION, ErasureWorker } from '../src/end-users/erasure.worker';
import { RespondRepository } from '../src/respond/respond.repository';
import { tokenUsageStep } from '../src/usage/usage.steps';
import { expectError } from './support/assertions';
import { FakeEmbeddings } from './support/fake-embeddings';
import { refusingWrites } from './support/locks';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { createTestApp, TestApp } from './support/test-app';
import { eventually } from './support/wait';

const FAST_ERASURE = { ERASURE_GRACE_SECONDS: '2', ERASURE_POLL_INTERVAL_MS: '100' };

/** Every table of the schema, and the rows in it whose text mentions any of `needles`. */
async function rowsMentioning(dataSource: DataSource, needles: string[]) {
  const tables: Array<{ table_name: string }> = await dataSource.query(
    `SELECT table_name FROM information_schema.tables
      WHERE table_schema = 'public' AND table_type = 'BASE TABLE'`,
  );
  const found: Record<string, number> = {};
  for (const { table_name: table } of tables) {
    const [{ n }] = await dataSource.query(
      `SELECT count(*)::int AS n FROM "${table}" t WHERE ${needles
        .map((_, i) => `strpos(t::text, $${i + 1}) > 0`)
        .join(' OR ')}`,
      needles,
    );
    if (n > 0) found[table] = n;
  }
  return { tables: tables.map((row) => row.table_name), found };
}

describe('Erasure: DELETE, grace period, worker, restarts', () => {
  // Embeddings on, so that memory_embeddings holds rows of the user too. On a database of its
  // own: in the run's shared one the worker would first embed every memory other suites left,
  // and this app's fast erasure worker would erase the users other tests here count.
  const embeddings = new FakeEmbeddings();
  let database: FreshDatabase;
  const withEmbeddings = () => ({
    ...FAST_ERASURE,
    DATABASE_URL: database.url,
    EMBEDDINGS_MODEL: 'fake-embed',
    EMBEDDINGS_BASE_URL: embeddings.url,
    EMBEDDINGS_POLL_INTERVAL_MS: '50',
    // The word written down below waits for the erasure, not for this worker.
    MEMORY_POSTINGS_TRIM_INTERVAL_MS: '3600000',
  });
  beforeAll(async () => {
    await embeddings.start();
    database = await createFreshDatabase('erasure', process.env.DATABASE_URL);
  });
  afterAll(async () => {
    await embeddings.stop();
    await database.drop();
  });

  it('erases everything about the user even across a restart during the grace period', async () => {
    let t: TestApp = await createTestApp({ env: withEmbeddings() });
    try {
      const a = await tenantWithKey(t, ['read_write']);
      const personalityId = await clonePersonality(t, a.auth, 'willow-listener');
      const userId = uniqueUserId('erase');
      for (const message of ['I am so sad today', 'thank you for listening', 'I feel better']) {
        expect(
          (await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message }))
            .status,
        ).toBe(200);
      }
      expect(
        (
          await t
            .http()
            .post(`/v1/end-users/${userId}/facts`)
            .set('Authorization', a.auth)
            .send({ content: 'Likes long walks' })
        ).status,
      ).toBe(201);
      // A turn paused for a client tool (contract §26) holds the user's message until it resumes.
      const tool = {
        name: 'lookup',
        description: 'Looks something up',
        parameters: { type: 'object' },
        execution: 'client',
      };
      await t
        .http()
        .patch(`/v1/personalities/${personalityId}`)
        .set('Authorization', a.auth)
        .send({ tools: [tool] })
        .expect(200);
      const paused = await respond(t, a.auth, {
        personality_id: personalityId,
        user_id: userId,
        message: 'lookup({"what": "my order"})',
      });
      expect(paused.body.status).toBe('requires_action');
      const dataSource = t.app.get(DataSource);
      const [{ id: internalId }] = await dataSource.query(
        'SELECT id FROM end_users WHERE user_id = $1',
        [userId],
      );
      // The local engine reports no tokens: the token rollups a provider's reply writes (the
      // breakdown's, the daily budget's) are written here as such a reply's statement writes them.
      await t.app.get(RespondRepository).storeExchange([
        tokenUsageStep({
          organizationId: a.organizationId,
          endUserId: internalId,
          personalityId,
          apiKeyId: null,
          at: new Date(),
          model: 'model-a',
          promptTokens: 10,
          completionTokens: 5,
          cachedTokens: 0,
        }),
      ]);
      // A word whose postings wait to be trimmed, as a reply writes it down when another reply
      // at once held them (migration TrimPostingsInTheBackground).
      await dataSource.query(
        `INSERT INTO memory_terms_to_trim (end_user_id, lexeme) VALUES ($1, 'cello')`,
        [internalId],
      );
      await eventually(async () => {
        const [{ n }] = await dataSource.query(
          'SELECT count(*)::int AS n FROM memory_embeddings WHERE end_user_id = $1',
          [internalId],
        );
        return n === 6 ? true : undefined;
      }, "the user's memories embedded");
      const before = await rowsMentioning(dataSource, [userId, internalId]);
      expect(before.found).toEqual(
        expect.objectContaining({
          end_users: 1,
          memories: 6,
          relationship_months: 1,
          end_user_facts: 1,
          tool_turns: 1,
        }),
      );
      // Every table that refers to an end user holds rows about this one, so the search below
      // would notice any of them left behind (a new table of user data has to be erased too).
      const referencing: Array<{ table_name: string }> = await dataSource.query(
        `SELECT DISTINCT table_name FROM information_schema.columns
        WHERE table_schema = 'public' AND column_name IN ('end_user_id')`,
      );
      expect(referencing.length).toBeGreaterThan(0);
      for (const { table_name } of referencing) expect(before.found[table_name]).toBeGreaterThan(0);

      const deleted = await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth);
      expect(deleted.status).toBe(202);
      expectError(
        await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message: 'hi' }),
        409,
        'end_user_under_deletion',
      );

      // Restart inside the grace period: the pending erasure is in the database, not in memory.
      await t.close();
      t = await createTestApp({ env: withEmbeddings() });
      const app = t;
      await eventually(async () => {
        const got = await app.http().get(`/v1/end-users/${userId}`).set('Authorization', a.auth);
        return got.status === 404 ? true : undefined;
      });
      const after = await rowsMentioning(app.app.get(DataSource), [userId, internalId]);
      expect(after.found).toEqual({});

      // Billing keeps the month counted; the personal rows are gone.
      const usage = await app
        .http()
        .get('/v1/usage/active-relationships')
        .set('Authorization', a.auth);
      expect(usage.body.active_relationships).toBe(1);
      const items = await app
        .http()
        .get('/v1/usage/active-relationships/items')
        .set('Authorization', a.auth);
      expect(items.body).toEqual({ data: [], has_more: false });

      const fresh = await app
        .http()
        .post('/v1/end-users')
        .set('Authorization', a.auth)
        .send({ user_id: userId });
      expect(fresh.status).toBe(201);
      expect(fresh.body.status).toBe('active');
      const exported = await app
        .http()
        .get(`/v1/end-users/${userId}/export`)
        .set('Authorization', a.auth);
      expect(exported.body.memories).toEqual([]);
    } finally {
      await t.close();
    }
  });

  it('reaches the stored Idempotency-Key answers: a replay after the erasure runs afresh, never from the store', async () => {
    const env = { ERASURE_GRACE_SECONDS: '0', ERASURE_POLL_INTERVAL_MS: '3600000' };
    const t = await createTestApp({ env });
    try {
      const a = await tenantWithKey(t, ['read_write']);
      const personalityId = await clonePersonality(t, a.auth, 'willow-listener');
      const userId = uniqueUserId('ssn');
      const bystander = uniqueUserId('bystander');
      const ssn = `078-05-${Math.floor(1000 + Math.random() * 8999)}`;
      const keyed = (key: string) =>
        t.http().post('/v1/end-users').set('Authorization', a.auth).set('Idempotency-Key', key);
      const create = () => keyed(`create-${userId}`).send({ user_id: userId, metadata: { ssn } });
      const createBystander = () =>
        keyed(`create-${bystander}`).send({ user_id: bystander, metadata: { ssn } });
      const talk = () =>
        t
          .http()
          .post('/v1/respond')
          .set('Authorization', a.auth)
          .set('Idempotency-Key', `respond-${userId}`)
          .send({ personality_id: personalityId, user_id: userId, message: `my ssn is ${ssn}` });

      const first = await create();
      expect(first.status).toBe(201);
      const replayed = await create();
      expect(replayed.headers['idempotent-replayed']).toBe('true');
      expect(replayed.body.metadata).toEqual({ ssn });
      expect((await createBystander()).status).toBe(201);
      const said = await talk();
      expect(said.status).toBe(200);
      expect((await talk()).headers['idempotent-replayed']).toBe('true');

      const dataSource = t.app.get(DataSource);
      const [{ id: internalId }] = await dataSource.query(
        'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
        [a.organizationId, userId],
      );
      const stored = () =>
        dataSource.query(`SELECT key FROM idempotency_keys WHERE scope_id = $1 ORDER BY key`, [
          a.organizationId,
        ]);
      expect(await stored()).toEqual([
        { key: `create-${bystander}` },
        { key: `create-${userId}` },
        { key: `respond-${userId}` },
      ]);

      expect(
        (await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth)).status,
      ).toBe(202);
      await t.app.get(ErasureWorker).eraseDue();

      // Nothing the erased person was (their user_id, their row) is stored anywhere, nor what
      // they said or heard in their organization (the local engine's replies are templates that
      // other suites' conversations on this database share, hence the scope).
      const after = await rowsMentioning(dataSource, [userId, internalId]);
      expect(after.found).toEqual({});
      // (The bystander's stored answer holds the same SSN: only the reply names the erased user.)
      const [{ n: mentions }] = await dataSource.query(
        `SELECT (SELECT count(*) FROM idempotency_keys k
                  WHERE k.scope_id = $1 AND strpos(k::text, $2) > 0)
              + (SELECT count(*) FROM memories m JOIN personalities p ON p.id = m.personality_id
                  WHERE p.organization_id = $1 AND (strpos(m.content, $2) > 0 OR strpos(m.content, $3) > 0))
                AS n`,
        [a.organizationId, said.body.reply.text, ssn],
      );
      expect(Number(mentions)).toBe(0);
      expect(await stored()).toEqual([{ key: `create-${bystander}` }]);
      // A replay runs afresh: a new end user from the body the client sends again, no replay.
      const again = await create();
      expect(again.status).toBe(201);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(again.body.created_at).not.toBe(first.body.created_at);
      const talkedAgain = await talk();
      expect(talkedAgain.status).toBe(200);
      expect(talkedAgain.headers['idempotent-replayed']).toBeUndefined();
      // Someone else's answer is still replayed.
      expect((await createBystander()).headers['idempotent-replayed']).toBe('true');
    } finally {
      await t.close();
    }
  });

  it('two instances erase each due user exactly once (FOR UPDATE SKIP LOCKED)', async () => {
    // Workers never poll during the test (a long interval); the test drives both by hand.
    const env = { ERASURE_GRACE_SECONDS: '0', ERASURE_POLL_INTERVAL_MS: '3600000' };
    const one = await createTestApp({ env });
    // Signed up before the second app exists: without JWT_SECRET each app has its own secret.
    const a = await tenantWithKey(one, ['read_write']);
    const two = await createTestApp({ env });
    try {
      const personalityId = await clonePersonality(one, a.auth);
      const userIds = Array.from({ length: 45 }, () => uniqueUserId('pair'));
      for (const userId of userIds) {
        await respond(one, a.auth, {
          personality_id: personalityId,
          user_id: userId,
          message: 'hi',
        });
        expect(
          (await one.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth)).status,
        ).toBe(202);
      }
      // Erasures other specs left behind (the fuzz and crash specs delete end users) must not
      // fall due while this one counts: only these 45 are due now.
      await one.app.get(DataSource).query(
        `UPDATE end_users SET erase_after = now() + interval '1 hour'
            WHERE status = 'deleting' AND NOT (user_id = ANY($1))`,
        [userIds],
      );
      const counts = await Promise.all([
        one.app.get(ErasureWorker).eraseDue(),
        two.app.get(ErasureWorker).eraseDue(),
        one.app.get(ErasureWorker).eraseDue(),
        two.app.get(ErasureWorker).eraseDue(),
      ]);
      expect(counts.reduce((sum, n) => sum + n, 0)).toBe(45);
      const [{ n }] = await one.app
        .get(DataSource)
        .query('SELECT count(*)::int AS n FROM end_users WHERE user_id = ANY($1)', [userIds]);
      expect(n).toBe(0);
    } finally {
      await one.close();
      await two.close();
    }
  });

  it('a failure mid-way rolls the whole erasure back, and the next run finishes it', async () => {
    const env = { ERASURE_GRACE_SECONDS: '0', ERASURE_POLL_INTERVAL_MS: '3600000' };
    const t = await createTestApp({ env });
    const dataSource = t.app.get(DataSource);
    try {
      const a = await tenantWithKey(t, ['read_write']);
      const personalityId = await clonePersonality(t, a.auth);
      const userId = uniqueUserId('crash');
      await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message: 'hi' });
      await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth);
      // The last step (deleting the row) fails once the memories are already deleted.
      await refusingWrites(
        (text) => dataSource.query(text),
        { table: 'end_users', operation: 'DELETE', message: 'simulated crash' },
        () => expect(t.app.get(ErasureWorker).eraseDue()).rejects.toThrow('simulated crash'),
      );
      const [{ memories }] = await dataSource.query(
        `SELECT count(*)::int AS memories FROM memories m JOIN end_users e ON e.id = m.end_user_id
          WHERE e.user_id = $1`,
        [userId],
      );
      expect(memories).toBe(2);

      expect(await t.app.get(ErasureWorker).eraseDue()).toBeGreaterThanOrEqual(1);
      const after = await rowsMentioning(dataSource, [userId]);
      expect(after.found).toEqual({});
    } finally {
      await t.close();
    }
  });
});

describe('Erasure of an end user holding more memories than a transaction takes', () => {
  let database: FreshDatabase;
  let t: TestApp;
  beforeAll(async () => {
    // A database of its own: the erasure it drives by hand takes whoever is due there.
    database = await createFreshDatabase('erasure-parts', process.env.DATABASE_URL);
    t = await createTestApp({
      env: {
        DATABASE_URL: database.url,
        ERASURE_GRACE_SECONDS: '0',
        ERASURE_POLL_INTERVAL_MS: '3600000',
        MEMORY_POSTINGS_TRIM_INTERVAL_MS: '3600000',
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await database.drop();
  });

  it('erases the memories in parts, each committed before the transaction that erases the rest', async () => {
    const dataSource = t.app.get(DataSource);
    const a = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId('heavy');
    expect(
      (await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message: 'hi' }))
        .status,
    ).toBe(200);
    // A fact given through the API (it names no memory): the first thing the erasure's own
    // transaction deletes, held below.
    expect(
      (
        await t
          .http()
          .post(`/v1/end-users/${userId}/facts`)
          .set('Authorization', a.auth)
          .send({ content: 'Keeps bees.' })
      ).status,
    ).toBe(201);
    const total = 2 * ERASED_ROWS_PER_TRANSACTION + 1_000;
    await dataSource.query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                             vocabulary_version, created_at, search)
       SELECT m.organization_id, m.end_user_id, m.personality_id, 'user', 'hive ' || g,
              m.vocabulary_version, m.created_at, to_tsvector('english', 'hive ' || g)
         FROM memories m JOIN end_users e ON e.id = m.end_user_id
        CROSS JOIN generate_series(1, $2::int) g
        WHERE e.user_id = $1 AND m.role = 'user'`,
      [userId, total - 2],
    );
    const held = async () => {
      const [row] = await dataSource.query(
        `SELECT (SELECT count(*)::int FROM memories m WHERE m.end_user_id = e.id) AS memories,
                (SELECT count(*)::int FROM memory_terms p WHERE p.end_user_id = e.id) AS postings,
                (SELECT count(*)::int FROM memory_terms p WHERE p.end_user_id = e.id
                    AND NOT EXISTS (SELECT FROM memories m WHERE m.id = p.memory_id)) AS orphans
           FROM end_users e WHERE e.user_id = $1`,
        [userId],
      );
      return row as { memories: number; postings: number; orphans: number } | undefined;
    };
    expect((await held())?.memories).toBe(total);
    expect(
      (await t.http().delete(`/v1/end-users/${userId}`).set('Authorization', a.auth)).status,
    ).toBe(202);

    const holder = dataSource.createQueryRunner();
    await holder.connect();
    await holder.startTransaction();
    let erasing: Promise<number> | undefined;
    try {
      await holder.query(
        `SELECT FROM end_user_facts f JOIN end_users e ON e.id = f.end_user_id
          WHERE e.user_id = $1 FOR UPDATE OF f`,
        [userId],
      );
      erasing = t.app.get(ErasureWorker).eraseDue();
      // Two parts committed; the third transaction took the last 1,000 and waits for the fact.
      const seen = await eventually(async () => {
        const now = await held();
        return now?.memories === total - 2 * ERASED_ROWS_PER_TRANSACTION ? now : undefined;
      }, 'the parts committed while the fact is held');
      // Each memory went with its postings; a remaining one keeps its number's at least.
      expect(seen.orphans).toBe(0);
      expect(seen.postings).toBeGreaterThanOrEqual(1_000);
    } finally {
      await holder.rollbackTransaction();
      await holder.release();
    }
    await expect(erasing).resolves.toBe(1);
    expect(await held()).toBeUndefined();
    const [{ postings }] = await dataSource.query(
      `SELECT count(*)::int AS postings FROM memory_terms p
        WHERE NOT EXISTS (SELECT FROM end_users e WHERE e.id = p.end_user_id)`,
    );
    expect(postings).toBe(0);
  });
});
