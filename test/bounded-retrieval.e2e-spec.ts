import { Client } from 'pg';
import { Database } from '../src/database/database';
import { sql } from '../src/database/sql';
import { expectError } from './support/assertions';
import { clonePersonality, importConversation, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { lockTable } from './support/locks';
import { counterValue } from './support/prometheus';
import { eventually } from './support/wait';
import { favouringWholeReads } from './support/whole-reads';

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

/** Words no stemmer changes and no other memory of these tests holds. */
const filler = (count: number, prefix: string) =>
  Array.from({ length: count }, (_, i) => `${prefix}${String.fromCharCode(97 + (i % 26))}${i}x`);

/**
 * Bounded database time (contract §29): search and recall find an old memory by a rare word
 * whatever the table's statistics say, read at most the first 32 distinct words, and a reply goes
 * on without recall past MEMORY_RECALL_TIMEOUT_MS; a request's statement past
 * DATABASE_STATEMENT_TIMEOUT_MS answers 503 database_timeout.
 */
describe('Bounded retrieval and database time (contract §29)', () => {
  let t: TestApp;
  /** The same service with narrow budgets, on the same database. */
  let tight: TestApp;
  let db: Client;
  let tenant: Tenant;
  let personalityId: string;

  beforeAll(async () => {
    t = await createTestApp();
    tight = await createTestApp({
      env: { MEMORY_RECALL_TIMEOUT_MS: '10', DATABASE_STATEMENT_TIMEOUT_MS: '500' },
    });
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
    tenant = await tenantWithKey(t, ['read_write']);
    personalityId = await clonePersonality(t, tenant.auth);
  });
  afterAll(async () => {
    await db.end();
    await tight.close();
    await t.close();
  });

  const importEndUser = (userId: string, contents: string[]) =>
    importConversation(t, tenant.auth, personalityId, userId, contents);

  const search = (app: TestApp, userId: string, q: string, limit = 10) =>
    app
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/memories/search`)
      .query({ q, limit })
      .set('Authorization', tenant.auth);
  const respond = (app: TestApp, userId: string, message: string) =>
    app
      .http()
      .post('/v1/respond')
      .set('Authorization', tenant.auth)
      .send({ personality_id: personalityId, user_id: userId, message });
  const contentsOf = (response: { body: { data: Array<{ content: string }> } }) =>
    response.body.data.map((memory) => memory.content);

  /** The memories memory_terms lists for `lexeme`, newest first, and the latest 64 holding it. */
  const postingsAndLatest = async (userId: string, lexeme: string) =>
    (
      await db.query<{ listed: string[]; latest: string[] }>(
        `SELECT ARRAY(SELECT t.memory_id::text FROM memory_terms t
                       WHERE t.end_user_id = e.id AND t.lexeme = $3
                       ORDER BY t.memory_id DESC) AS listed,
                ARRAY(SELECT m.id::text FROM memories m
                       WHERE m.end_user_id = e.id AND m.search @@ $3::tsquery
                       ORDER BY m.id DESC LIMIT 64) AS latest
           FROM end_users e WHERE e.user_id = $1 AND e.organization_id = $2`,
        [userId, tenant.organizationId, lexeme],
      )
    ).rows[0];

  /** 300 memories, the first the only one about the greyhound; the rest share everyday words. */
  const GREYHOUND = 'My greyhound is called Bolt';
  const history = [
    GREYHOUND,
    ...Array.from({ length: 299 }, (_, i) =>
      i % 2 === 0
        ? `Today I feel tired after work, day ${i}, and I would like to talk about it.`
        : `That sounds like a long day at work; tell me how you feel today (${i}).`,
    ),
  ];

  it('finds the first of 300 memories by a rare word, with statistics and without', async () => {
    const userId = uniqueUserId('greyhound');
    await importEndUser(userId, history);
    const found = async () => {
      const response = await search(t, userId, 'greyhound');
      expect(response.status).toBe(200);
      // The statement, and what the replies below added about it.
      expect(contentsOf(response)).toContain(GREYHOUND);
      const recalled = await respond(t, userId, 'Do you remember my greyhound?');
      expect(recalled.status).toBe(200);
      expect(recalled.body.reply.text).toContain(GREYHOUND);
    };
    // As after a bulk import: no statistics yet (autovacuum is off on this machine)…
    await found();
    // …and as production has them: the word stays rare, the common ones change nothing.
    await db.query('ANALYZE memories');
    await db.query('ANALYZE memory_terms');
    await found();
    // Everyday words of the whole history still rank the memories holding more of them first.
    const everyday = await search(t, userId, 'tired after work today', 5);
    expect(contentsOf(everyday)).toHaveLength(5);
    for (const content of contentsOf(everyday)) expect(content).toMatch(/tired after work/);
  });

  it('counts a word the end user holds in 64 memories or more as a stop word for the share', async () => {
    const userId = uniqueUserId('band');
    const BAND = 'My favourite band is Radiohead';
    await importEndUser(userId, [
      BAND,
      ...Array.from({ length: 80 }, (_, i) => `Can I tell you something? I love day ${i}.`),
    ]);
    // "tell" and "love" are in 80 memories each: the one memory holding "band" comes first, with
    // the whole share of the words that tell memories apart, though others hold two words of three.
    const response = await search(t, userId, 'Which band did I tell you I love?', 3);
    expect(response.status).toBe(200);
    expect(contentsOf(response)[0]).toBe(BAND);
    expect((response.body.data as Array<{ score: number }>)[0].score).toBe(1);
    const recalled = await respond(t, userId, 'Which band did I tell you I love?');
    expect(recalled.body.reply.text).toContain(BAND);
  });

  it('reads the first 32 distinct words of a text, not the 33rd', async () => {
    const userId = uniqueUserId('words');
    await importEndUser(userId, ['I keep a pet axolotl', 'Nice!']);
    // 31 words no memory holds, each twice (a repeat is not a new word), then the axolotl.
    const words = filler(31, 'n');
    const thirtySecond = [...words, ...words, 'axolotl'].join(' ');
    expect(contentsOf(await search(t, userId, thirtySecond))).toEqual(['I keep a pet axolotl']);
    const thirtyThird = [...words, 'zzzunknown', 'axolotl'].join(' ');
    expect(contentsOf(await search(t, userId, thirtyThird))).toEqual([]);
  });

  it('shares 1,024 candidates among the words of a long text: 64 each up to 16, 32 each for 32', async () => {
    const userId = uniqueUserId('share');
    const kayaks = Array.from({ length: 40 }, (_, i) => `Kayak trip number ${i}`);
    await importEndUser(userId, kayaks);
    const found = async (words: number) => {
      const text = ['kayak', ...filler(words - 1, 's')].join(' ');
      const response = await search(t, userId, text, 50);
      expect(response.status).toBe(200);
      return contentsOf(response);
    };
    // 16 words: every one of the 40 memories holding "kayak" is a candidate.
    expect(await found(16)).toHaveLength(40);
    // 32 words: each reads the latest 32 of its memories, so the 8 oldest are not found.
    expect(await found(32)).toEqual(kayaks.slice(8).reverse());
  });

  it('keeps the latest 64 memories of a word per end user, whatever arrives and how', async () => {
    const userId = uniqueUserId('kayak');
    // 100 imported in one statement, then 10 more through replies (a trigger pass each).
    await importEndUser(
      userId,
      Array.from({ length: 100 }, (_, i) => `Kayak trip number ${i} was fun`),
    );
    for (let i = 0; i < 5; i++) {
      expect((await respond(t, userId, `Another kayak outing, the ${i}th`)).status).toBe(200);
    }
    // The latest 64 holders are listed, and only they.
    const postings = await postingsAndLatest(userId, 'kayak');
    expect(postings.listed).toHaveLength(64);
    expect(postings.listed).toEqual(postings.latest);
    const holders = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM memories m JOIN end_users e ON e.id = m.end_user_id
        WHERE e.user_id = $1 AND e.organization_id = $2 AND m.search @@ 'kayak'::tsquery`,
      [userId, tenant.organizationId],
    );
    expect(holders.rows[0].n).toBeGreaterThan(64);
    const found = await search(t, userId, 'kayak', 50);
    expect(found.status).toBe(200);
    expect(found.body.data).toHaveLength(50);
  });

  it('keeps the latest 64 whatever replies are written at once, and never one of them', async () => {
    const userId = uniqueUserId('rowing');
    await importEndUser(
      userId,
      Array.from({ length: 70 }, (_, i) => `Rowing practice number ${i} was hard`),
    );
    // A trim sees neither the postings of replies still being written nor, past the latest 64,
    // those another trim holds (skipped, never waited for): replies at once may leave a few past
    // the 64, which no read reaches (each reads a word's newest). Never one inside them.
    const replies = await Promise.all(
      Array.from({ length: 24 }, (_, i) => respond(t, userId, `More rowing today, session ${i}`)),
    );
    for (const reply of replies) expect(reply.status).toBe(200);
    expect((await respond(t, userId, 'Rowing again tomorrow')).status).toBe(200);
    const postings = await postingsAndLatest(userId, 'row');
    expect(postings.listed.slice(0, 64)).toEqual(postings.latest);
    expect(postings.listed.length).toBeLessThanOrEqual(64 + 24);
  });

  it('keeps the latest 64 when a memory of the word is being forgotten as a trim runs', async () => {
    const userId = uniqueUserId('sculling');
    await importEndUser(
      userId,
      Array.from({ length: 64 }, (_, i) => `Sculling drill number ${i}`),
    );
    const [{ oldest }] = (
      await db.query<{ oldest: string }>(
        `SELECT min(t.memory_id)::text AS oldest FROM memory_terms t
           JOIN end_users e ON e.id = t.end_user_id
          WHERE e.user_id = $1 AND t.lexeme = 'scull'`,
        [userId],
      )
    ).rows;
    // The oldest of the 64 is being forgotten (its posting held by the delete) as a reply adds
    // one: the trim must not take the next one instead, or 63 would be left.
    const forgetting = new Client({ connectionString: process.env.DATABASE_URL });
    await forgetting.connect();
    try {
      await forgetting.query('BEGIN');
      await forgetting.query('DELETE FROM memories WHERE id = $1', [oldest]);
      expect((await respond(t, userId, 'Sculling again tomorrow')).status).toBe(200);
      await forgetting.query('COMMIT');
    } finally {
      await forgetting.end();
    }
    const postings = await postingsAndLatest(userId, 'scull');
    expect(postings.listed).toEqual(postings.latest);
    expect(postings.listed).toHaveLength(64);
  });

  it('locks only the postings it lets go of, not the 64 it keeps', async () => {
    const userId = uniqueUserId('canoe');
    await importEndUser(
      userId,
      Array.from({ length: 70 }, (_, i) => `Canoe race number ${i} was close`),
    );
    for (let i = 0; i < 3; i++) {
      expect((await respond(t, userId, `Another canoe race, the ${i}th`)).status).toBe(200);
    }
    // A row lock leaves its locker in xmax (and one WAL record per row): every reply used to lock
    // all 64 kept postings of each of its words.
    const locked = await db.query<{ kept: number; locked: number }>(
      `SELECT count(*)::int AS kept, count(*) FILTER (WHERE t.xmax <> '0')::int AS locked
         FROM memory_terms t JOIN end_users e ON e.id = t.end_user_id
        WHERE e.user_id = $1 AND e.organization_id = $2 AND t.lexeme = 'cano'`,
      [userId, tenant.organizationId],
    );
    expect(locked.rows[0]).toEqual({ kept: 64, locked: 0 });
  });

  it('trims a word by the addresses of what it lets go of, whatever plan a session cached', async () => {
    const userId = uniqueUserId('paddle');
    await importEndUser(
      userId,
      Array.from({ length: 70 }, (_, i) => `Paddle day ${i}`),
    );
    // One more memory holding "paddle", in a session whose costs make reading the whole table
    // look cheap, as a plan cached while the table was small does: its trim lets one of the 64 go,
    // looked up by address, never by reading every posting of every end user.
    await favouringWholeReads(db, 'memory_terms', async (wholeReads) => {
      const before = await wholeReads();
      await db.query(
        `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                               vocabulary_version, created_at, search)
         SELECT organization_id, end_user_id, personality_id, 'user', 'paddle',
                vocabulary_version, created_at, to_tsvector('english', 'paddle')
           FROM memories WHERE id = (SELECT max(m.id) FROM memories m
                                     JOIN end_users e ON e.id = m.end_user_id
                                    WHERE e.user_id = $1)`,
        [userId],
      );
      expect(await wholeReads()).toBe(before);
      const [{ listed }] = (
        await db.query<{ listed: number }>(
          `SELECT count(*)::int AS listed FROM memory_terms t JOIN end_users e ON e.id = t.end_user_id
            WHERE e.user_id = $1 AND t.lexeme = 'paddl'`,
          [userId],
        )
      ).rows;
      expect(listed).toBe(64);
    });
  });

  it('trims a word by reading its latest postings, not those it let go of before', async () => {
    const userId = uniqueUserId('oar');
    await importEndUser(
      userId,
      Array.from({ length: 70 }, (_, i) => `Oar stroke ${i}`),
    );
    let written = 0;
    /**
     * One more memory holding "oar" and 11 words of its own, as a reply writes it (one statement,
     * the trigger's pass): each word a posting, so those of "oar" are spread over the table.
     */
    const remember = () => {
      const content = ['oar', ...filler(11, `o${written++}`)].join(' ');
      return db.query(
        `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                               vocabulary_version, created_at, search)
         SELECT organization_id, end_user_id, personality_id, 'user', $2, vocabulary_version,
                created_at, to_tsvector('english', $2)
           FROM memories WHERE id = (SELECT max(m.id) FROM memories m
                                     JOIN end_users e ON e.id = m.end_user_id
                                    WHERE e.user_id = $1)`,
        [userId, content],
      );
    };
    /**
     * Blocks of memory_terms and its indexes one memory's trigger pass reads, counted by this
     * session's transaction alone (pg_stat_get_xact_blocks_fetched: no other session's reads).
     */
    const blocksOfOne = async () => {
      const read = async () => {
        const { rows } = await db.query<{ n: string }>(
          `SELECT sum(pg_stat_get_xact_blocks_fetched(c.oid))::text AS n FROM pg_class c
            WHERE c.oid = 'memory_terms'::regclass
               OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'memory_terms'::regclass)`,
        );
        return Number(rows[0].n);
      };
      await db.query('BEGIN');
      try {
        const before = await read();
        await remember();
        return (await read()) - before;
      } finally {
        await db.query('COMMIT');
      }
    };
    await remember();
    const first = await blocksOfOne();
    // 1,000 more, each letting the oldest posting of "oar" go, while a snapshot older than them is
    // open (as 32 replies at once keep one): the postings let go of, and their rows, stay in the
    // index and the table, not yet reclaimable, until VACUUM passes after the snapshot has ended.
    const holder = new Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    let later: number;
    try {
      await holder.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
      await holder.query('SELECT 1');
      for (let i = 0; i < 1_000; i++) await remember();
      later = await blocksOfOne();
    } finally {
      await holder.query('ROLLBACK');
      await holder.end();
    }
    // Reads the window of "oar" only: the 1,000 let go of cost nothing (before: 117 -> 285).
    expect(later).toBeLessThan(first + 50);
    const postings = await postingsAndLatest(userId, 'oar');
    expect(postings.listed).toEqual(postings.latest);
  });

  it('an 8,000-character message is answered, its recall bounded by its first 32 words', async () => {
    const userId = uniqueUserId('long-message');
    await importEndUser(userId, [GREYHOUND, ...history.slice(1, 60)]);
    const long = `greyhound ${filler(1_400, 'w').join(' ')}`.slice(0, 8_000);
    const reply = await respond(t, userId, long);
    expect(reply.status).toBe(200);
    expect(reply.body.reply.text).toContain(GREYHOUND);
  });

  it('past MEMORY_RECALL_TIMEOUT_MS the reply goes on without recall, logged and counted', async () => {
    const userId = uniqueUserId('recall-timeout');
    await importEndUser(userId, history.slice(0, 60));
    const timeouts = () => counterValue(tight, 'memory_recall_timeouts_total');
    const before = await timeouts();

    // Recall reads memory_terms: held by another session, it waits until its budget is spent.
    const lock = await lockTable('memory_terms');
    try {
      const reply = respond(tight, userId, 'Do you remember my greyhound?').then((r) => r);
      // Released as soon as the budget ran out, so other specs' replies barely wait.
      await eventually(async () => ((await timeouts()) > before ? true : undefined));
      await lock.release();
      const answered = await reply;
      expect(answered.status).toBe(200);
      expect(answered.body.reply.text).not.toContain(GREYHOUND);
    } finally {
      await lock.release();
    }
    const warning = tight.logs
      .entries()
      .find((entry) => String(entry.msg).includes('MEMORY_RECALL_TIMEOUT_MS'));
    expect(warning).toMatchObject({ level: 'warn', timeoutMs: 10 });
  });

  it('a statement past DATABASE_STATEMENT_TIMEOUT_MS answers 503 database_timeout', async () => {
    const userId = uniqueUserId('statement-timeout');
    await importEndUser(userId, ['Hello']);
    const holder = new Client({ connectionString: process.env.DATABASE_URL });
    await holder.connect();
    try {
      // The end user's row, locked by another session: the PATCH's UPDATE waits for it.
      await holder.query('BEGIN');
      await holder.query(
        `SELECT 1 FROM end_users WHERE organization_id = $1 AND user_id = $2 FOR UPDATE`,
        [tenant.organizationId, userId],
      );
      const patch = () =>
        tight
          .http()
          .patch(`/v1/end-users/${encodeURIComponent(userId)}`)
          .set('Authorization', tenant.auth)
          .send({ metadata: { plan: 'pro' } });
      const refused = await patch();
      expectError(refused, 503, 'database_timeout');
      expect(refused.headers['retry-after']).toBe('1');
      await holder.query('ROLLBACK');
      expect((await patch()).status).toBe(200);
    } finally {
      await holder.end();
    }
  });

  it('runs every session without JIT compilation, the asynchronous-commit ones included', async () => {
    const database = t.app.get(Database);
    const settingsOf = (asyncCommit: boolean) =>
      database.row<{ jit: string; commit: string }>(
        sql`SELECT current_setting('jit') AS jit, current_setting('synchronous_commit') AS commit`,
        { asyncCommit },
      );
    const server = new Client({ connectionString: process.env.DATABASE_URL });
    await server.connect();
    const serverCommit = (
      await server
        .query<{ commit: string }>(`SELECT current_setting('synchronous_commit') AS commit`)
        .finally(() => server.end())
    ).rows[0].commit;
    expect(await settingsOf(false)).toEqual({ jit: 'off', commit: serverCommit });
    expect(await settingsOf(true)).toEqual({ jit: 'off', commit: 'off' });
    // A statement past jit_above_cost: compiled where JIT is on and available (the server's own
    // default), not on the service's sessions.
    const planOf = async (query: (text: string) => Promise<Array<Record<string, unknown>>>) => {
      const [{ 'QUERY PLAN': plan }] = await query(
        `EXPLAIN (ANALYZE, FORMAT JSON) SELECT sum(g) FROM generate_series(1, 1000) g`,
      );
      return (plan as Array<Record<string, unknown>>)[0];
    };
    const service = await database.transaction(async (manager) => {
      await manager.query('SET LOCAL jit_above_cost = 0');
      return planOf((text) => manager.query(text));
    });
    expect(service).not.toHaveProperty('JIT');
    const own = new Client({ connectionString: process.env.DATABASE_URL });
    await own.connect();
    try {
      await own.query('SET jit_above_cost = 0');
      const { rows } = await own.query<{ available: boolean; jit: string }>(
        `SELECT pg_jit_available() AS available, current_setting('jit') AS jit`,
      );
      // The check could fail: on a server that compiles, a session of its own does.
      if (rows[0].available && rows[0].jit === 'on') {
        expect(await planOf(async (text) => (await own.query(text)).rows)).toHaveProperty('JIT');
      }
    } finally {
      await own.end();
    }
  });
});
