import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { Client } from 'pg';
import {
  CANDIDATES_PER_READ,
  POSTINGS_PER_WORD,
  RETRIEVAL_WORDS,
} from '../../src/memory/memory-search';
import { freshDatabase } from '../lib/service';
import { loadAverages, percentile, round2 } from './support/stats';

/**
 * What a reply's write and conversation read would cost with the postings kept another way
 * (docs/memory.md, "Other layouts"). Straight to PostgreSQL, no service: each layout on a fresh,
 * migrated database of its own; END_USERS end users, each brought to WARM_REPLIES replies (a
 * word's postings past their 64), then WRITES more writes of a reply's two memories from CLIENTS
 * clients at once, timed one by one, then READS conversation reads (the statement
 * `npm run sql:generate` records for "a later reply") from one client, then ONE_USER_WRITES
 * writes for one more end user from ONE_USER_CLIENTS clients at once; ROUNDS rounds, the order
 * of the layouts reversed each round.
 *
 * - `memory_terms`: the tables as migrated (the trigger's insert and trim). After the one end
 *   user's writes, the words the trigger wrote down are trimmed as PostingsTrimWorker trims them
 *   (memory_terms_trim_words, 100 rows a statement), timed; postings a word are counted before
 *   and after.
 * - `trimmed_one_memory_in_eight`: the trim only for words of a memory with
 *   `hashint8(id) & 7 = 0`, 64 at most each time.
 * - `one_row_per_word`: a prototype made here only: `memory_postings (end_user_id, lexeme)` with
 *   the newest 64 ids, personalities and lengths as arrays, merged newest first by `INSERT … ON
 *   CONFLICT DO UPDATE`, and the read taking a word's row instead of its entries.
 */

const END_USERS = 100;
const WARM_REPLIES = Number(process.env.BENCH_WARM_REPLIES ?? 150);
const WRITES = Number(process.env.BENCH_WRITES ?? 5_000);
const READS = Number(process.env.BENCH_READS ?? 2_000);
const CLIENTS = 2;
/** MEMORY_RECALL_LIMIT's default, the recorded read's. */
const RECALL = 8;
/** One end user's replies at once, as bench long-history sends them (fewer: two cores). */
const ONE_USER_CLIENTS = 16;
const ONE_USER_WRITES = Number(process.env.BENCH_ONE_USER_WRITES ?? 3_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 2);
const ORGANIZATION = '00000000-0000-4000-8000-000000000001';
const PERSONALITY = '00000000-0000-4000-8000-000000000002';
const MESSAGE = 'I had a long day at work today and I feel a bit tired.';
const REPLY = 'That sounds like a long day. Rest a little, and tell me how work went today.';

type Layout = 'memory_terms' | 'trimmed_one_memory_in_eight' | 'one_row_per_word';

const endUserId = (n: number) => `00000000-0000-4000-9000-${String(n).padStart(12, '0')}`;

const WRITE = `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content,
                                     created_at, search)
  SELECT $1, $2::uuid, $3, v.role, v.content, now(), to_tsvector('english', v.content)
    FROM (VALUES (1, 'user', $4), (2, 'personality', $5)) v(ord, role, content) ORDER BY v.ord`;

const ROW_PER_WORD = [
  `CREATE TABLE memory_postings (
     end_user_id uuid NOT NULL, lexeme text COLLATE "C" NOT NULL, memory_ids bigint[] NOT NULL,
     personality_ids uuid[] NOT NULL, lengths int[] NOT NULL,
     PRIMARY KEY (end_user_id, lexeme)) WITH (fillfactor = 50)`,
  `CREATE FUNCTION memories_index_postings() RETURNS trigger LANGUAGE plpgsql AS $$
   BEGIN
     INSERT INTO memory_postings AS p (end_user_id, lexeme, memory_ids, personality_ids, lengths)
     SELECT n.end_user_id, l.lexeme, array_agg(n.id ORDER BY n.id DESC),
            array_agg(n.personality_id ORDER BY n.id DESC), array_agg(length(n.search) ORDER BY n.id DESC)
       FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
      GROUP BY n.end_user_id, l.lexeme
      ORDER BY n.end_user_id, l.lexeme
     ON CONFLICT (end_user_id, lexeme) DO UPDATE
        SET (memory_ids, personality_ids, lengths) = (
              SELECT array_agg(u.id ORDER BY u.id DESC), array_agg(u.personality_id ORDER BY u.id DESC),
                     array_agg(u.length ORDER BY u.id DESC)
                FROM (SELECT * FROM unnest(EXCLUDED.memory_ids || p.memory_ids,
                                           EXCLUDED.personality_ids || p.personality_ids,
                                           EXCLUDED.lengths || p.lengths) AS u(id, personality_id, length)
                       ORDER BY u.id DESC LIMIT 64) u);
     RETURN NULL;
   END $$`,
  `CREATE TRIGGER memories_index_postings AFTER INSERT ON memories
     REFERENCING NEW TABLE AS new_memories FOR EACH STATEMENT EXECUTE FUNCTION memories_index_postings()`,
];

/** The conversation read of a later reply, as recorded, with its parameters in order. */
function conversationRead(layout: Layout): string {
  const recorded = readFileSync(
    resolve(__dirname, '../../src/queries/respond.service.sql'),
    'utf8',
  );
  const section = recorded.slice(recorded.indexOf('-- a later reply'));
  const statement = section.slice(section.indexOf('\n') + 1, section.indexOf(';\n'));
  if (layout !== 'one_row_per_word') return statement;
  const replaced = (text: string, from: RegExp, to: (...groups: string[]) => string) => {
    const next = text.replace(from, (_match, ...groups: string[]) => to(...groups));
    if (next === text) throw new Error(`the recorded read changed: ${from}`);
    return next;
  };
  const common = replaced(
    statement,
    /SELECT FROM memory_terms t\s+WHERE t\.end_user_id = e\.id AND t\.lexeme = w\.lexeme\s+LIMIT \$6\) held\) = \$7\)/,
    () => `SELECT FROM memory_postings p WHERE p.end_user_id = e.id AND p.lexeme = w.lexeme
       AND cardinality(p.memory_ids) >= least($6::int, $7::int)) held) = 1)`,
  );
  return replaced(
    common,
    /SELECT t\.memory_id, t\.personality_id, t\.memory_length FROM memory_terms t\s+WHERE t\.end_user_id = e\.id AND t\.lexeme = w\.lexeme AND t\.memory_id < (COALESCE\(h\.bound, \d+\))\s+ORDER BY t\.memory_id DESC/,
    (bound) => `SELECT u.memory_id, u.personality_id, u.memory_length FROM memory_postings p
      CROSS JOIN LATERAL unnest(p.memory_ids, p.personality_ids, p.lengths)
                         AS u(memory_id, personality_id, memory_length)
      WHERE p.end_user_id = e.id AND p.lexeme = w.lexeme AND u.memory_id < ${bound}
      ORDER BY u.memory_id DESC`,
  );
}

/** The parameters of the recorded read, in its order (rankedMemories' then the history's). */
function readParameters(userId: string): unknown[] {
  return [
    ORGANIZATION,
    PERSONALITY,
    PERSONALITY,
    MESSAGE,
    RETRIEVAL_WORDS,
    POSTINGS_PER_WORD,
    POSTINGS_PER_WORD,
    POSTINGS_PER_WORD,
    CANDIDATES_PER_READ,
    RECALL,
    PERSONALITY,
    PERSONALITY,
    ORGANIZATION,
    userId,
  ];
}

async function measure(layout: Layout): Promise<Record<string, unknown>> {
  const database = await freshDatabase();
  const clients: Client[] = [];
  try {
    const migrated = spawnSync('npm', ['run', '--silent', 'migration:run'], {
      env: { ...process.env, DATABASE_URL: database.url },
      encoding: 'utf8',
    });
    if (migrated.status !== 0) throw new Error(`migrations failed: ${migrated.stderr}`);
    for (let i = 0; i < Math.max(CLIENTS, ONE_USER_CLIENTS); i++) {
      const client = new Client({ connectionString: database.url });
      await client.connect();
      await client.query('SET jit = off');
      clients.push(client);
    }
    const [db] = clients;
    await db.query(`INSERT INTO organizations (id, name) VALUES ($1, 'bench')`, [ORGANIZATION]);
    await db.query(
      `INSERT INTO personalities (id, organization_id, source_slug, source_version, name,
                                  description, traits, voice, system_prompt, replies)
       VALUES ($1, $2, 'bench', '1', 'Bench', 'bench', '{}', '{}', '', '{}')`,
      [PERSONALITY, ORGANIZATION],
    );
    // END_USERS of them and one more (the last) for the one-end-user phase.
    await db.query(
      `INSERT INTO end_users (id, organization_id, user_id)
       SELECT ('00000000-0000-4000-9000-' || lpad(i::text, 12, '0'))::uuid, $1, 'u' || i
         FROM generate_series(0, $2) i`,
      [ORGANIZATION, END_USERS],
    );
    if (layout === 'trimmed_one_memory_in_eight') {
      const [{ definition }] = (
        await db.query<{ definition: string }>(
          `SELECT pg_get_functiondef('memories_index_terms'::regproc) AS definition`,
        )
      ).rows;
      const gated = definition
        .replace(
          'GROUP BY n.end_user_id, l.lexeme) k',
          'WHERE hashint8(n.id) & 7 = 0 GROUP BY n.end_user_id, l.lexeme) k',
        )
        .replace('LIMIT k.added', 'LIMIT 64');
      if (!gated.includes('hashint8') || gated.includes('k.added')) {
        throw new Error('the trigger memories_index_terms changed');
      }
      await db.query(gated);
    }
    if (layout === 'one_row_per_word')
      for (const statement of ROW_PER_WORD) await db.query(statement);

    const write = (client: Client, endUser: number) =>
      client.query({
        name: 'write',
        text: WRITE,
        values: [ORGANIZATION, endUserId(endUser), PERSONALITY, MESSAGE, REPLY],
      });
    /**
     * `count` writes shared by `parallel` clients, the n-th for end user `endUserOf(n)`, each timed;
     * milliseconds, in order of completion.
     */
    const writes = async (
      count: number,
      parallel = CLIENTS,
      endUserOf = (n: number) => n % END_USERS,
    ): Promise<number[]> => {
      const timings: number[] = [];
      let next = 0;
      await Promise.all(
        clients.slice(0, parallel).map(async (client) => {
          while (next < count) {
            const n = next++;
            const startedAt = performance.now();
            await write(client, endUserOf(n));
            timings.push(performance.now() - startedAt);
          }
        }),
      );
      return timings;
    };
    await writes(END_USERS * WARM_REPLIES);
    const read = conversationRead(layout);
    if (layout === 'one_row_per_word') {
      // Both layouts were written so far: the prototype's read must answer what the service's does.
      const original = conversationRead('memory_terms');
      for (let user = 0; user < END_USERS; user++) {
        const answer = async (text: string) =>
          JSON.stringify((await db.query(text, readParameters(`u${user}`))).rows);
        if ((await answer(read)) !== (await answer(original))) {
          throw new Error(`one_row_per_word: end user u${user} read differently`);
        }
      }
      await db.query('ALTER TABLE memories DISABLE TRIGGER memories_index_terms');
    }
    const startedAt = performance.now();
    const timed = await writes(WRITES);
    const seconds = (performance.now() - startedAt) / 1000;

    /** `count` reads after 100 unmeasured, the n-th as end user `userOf(n)`; milliseconds. */
    const readsOf = async (count: number, userOf: (n: number) => string) => {
      const timings: number[] = [];
      for (let i = 0; i < count + 100; i++) {
        const begun = performance.now();
        await db.query({ name: 'read', text: read, values: readParameters(userOf(i)) });
        if (i >= 100) timings.push(performance.now() - begun);
      }
      return timings;
    };
    const reads = await readsOf(READS, (n) => `u${n % END_USERS}`);

    // One more end user (the last), every write theirs, ONE_USER_CLIENTS at once.
    const soloStartedAt = performance.now();
    const solo = await writes(ONE_USER_WRITES, ONE_USER_CLIENTS, () => END_USERS);
    const soloSeconds = (performance.now() - soloStartedAt) / 1000;
    const soloReads = await readsOf(READS / 4, () => `u${END_USERS}`);
    // The words the trigger wrote down, and PostingsTrimWorker's pass over them, as it runs them.
    const soloPerWordBefore =
      layout === 'one_row_per_word'
        ? undefined
        : (
            await db.query<{ most: number }>(
              `SELECT max(n)::int AS most FROM (SELECT count(*) AS n FROM memory_terms
                 WHERE end_user_id = $1 GROUP BY lexeme) w`,
              [endUserId(END_USERS)],
            )
          ).rows[0].most;
    let drain: Record<string, number> | undefined;
    if (layout !== 'one_row_per_word') {
      const [{ waiting }] = (
        await db.query<{ waiting: number }>(
          'SELECT count(*)::int AS waiting FROM memory_terms_to_trim',
        )
      ).rows;
      const drainStartedAt = performance.now();
      let letGo = 0;
      for (;;) {
        const { rows } = await db.query<{ let_go: number }>(
          'SELECT memory_terms_trim_words(100) AS let_go',
        );
        letGo += rows[0].let_go;
        if (rows[0].let_go < 100) break;
      }
      const ms = round2(performance.now() - drainStartedAt);
      const [{ after }] = (
        await db.query<{ after: number }>('SELECT count(*)::int AS after FROM memory_terms_to_trim')
      ).rows;
      // The words written again wait for one more look, as for the worker's next pass.
      drain = { rows_waiting: waiting, rows_let_go: letGo, rows_written_again: after, ms };
    }
    // The statistics of the clients' sessions reach the view within a second.
    await new Promise((done) => setTimeout(done, 1_500));
    const [updates] = (
      await db.query<{ updated: number; hot: number }>(
        `SELECT coalesce(sum(n_tup_upd), 0)::int AS updated, coalesce(sum(n_tup_hot_upd), 0)::int AS hot
           FROM pg_stat_user_tables WHERE relname = 'memory_postings'`,
      )
    ).rows;
    const lists =
      layout === 'one_row_per_word'
        ? `SELECT end_user_id, cardinality(memory_ids) AS n,
                  memory_ids = ARRAY(SELECT i FROM unnest(memory_ids) i ORDER BY i DESC) AS newest_first
             FROM memory_postings`
        : `SELECT end_user_id, count(*) AS n, true AS newest_first
             FROM memory_terms GROUP BY end_user_id, lexeme`;
    const postings = (
      await db.query<{ solo: boolean; average: string; most: number; unordered: number }>(
        `SELECT l.end_user_id = $1 AS solo, round(avg(n), 1)::text AS average, max(n)::int AS most,
                count(*) FILTER (WHERE NOT newest_first)::int AS unordered
           FROM (${lists}) l GROUP BY 1 ORDER BY 1`,
        [endUserId(END_USERS)],
      )
    ).rows;
    for (const { unordered } of postings) {
      if (unordered > 0) throw new Error(`${layout}: ${unordered} lists out of order`);
    }
    const perWord = (solo: boolean) => {
      const row = postings.find((p) => p.solo === solo)!;
      return { average: Number(row.average), most: row.most };
    };
    const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
    return {
      writes_per_second: Math.round(WRITES / seconds),
      write_ms: {
        mean: round2(mean(timed)),
        p50: round2(percentile(timed, 50)),
        p99: round2(percentile(timed, 99)),
      },
      conversation_read_ms: {
        mean: round2(mean(reads)),
        p50: round2(percentile(reads, 50)),
        p99: round2(percentile(reads, 99)),
      },
      postings_per_word: perWord(false),
      ...(layout === 'one_row_per_word'
        ? { updates: { all: updates.updated, hot: updates.hot } }
        : {}),
      one_end_user: {
        writes_per_second: Math.round(ONE_USER_WRITES / soloSeconds),
        write_ms: { p50: round2(percentile(solo, 50)), p99: round2(percentile(solo, 99)) },
        conversation_read_ms: {
          mean: round2(mean(soloReads)),
          p99: round2(percentile(soloReads, 99)),
        },
        ...(drain
          ? {
              postings_per_word_before_the_worker: soloPerWordBefore,
              worker_pass: drain,
              postings_per_word_after_the_worker: perWord(true),
            }
          : { postings_per_word: perWord(true) }),
      },
    };
  } finally {
    for (const client of clients) await client.end();
    await database.drop();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const layouts: Layout[] = ['memory_terms', 'trimmed_one_memory_in_eight', 'one_row_per_word'];
  const rounds: Array<Record<string, unknown>> = [];
  for (let round = 0; round < ROUNDS; round++) {
    // The order turns each round: a database created later finds the server warmer.
    const order = round % 2 === 0 ? layouts : [...layouts].reverse();
    const results: Record<string, unknown> = {};
    for (const layout of order) results[layout] = await measure(layout);
    rounds.push({ order, layouts: results });
  }
  return {
    method: `PostgreSQL only, no service: each layout on a fresh migrated database (BENCH_DATABASE_URL or the embedded default); ${END_USERS} end users brought to ${WARM_REPLIES} replies each (the message and the reply below: 13 distinct words, each past its 64 postings: the trim's worst case), then ${WRITES} writes of a reply's two memories from ${CLIENTS} clients at once (prepared, round trip timed), then ${READS} conversation reads as src/queries/respond.service.sql records them (recall 8, history 20) from one client after 100 warm-up reads (no VACUUM: autovacuum is off on this machine's server), then ${ONE_USER_WRITES} writes for one more end user from ${ONE_USER_CLIENTS} clients at once and ${READS / 4} reads as them, then (both memory_terms layouts) PostingsTrimWorker's pass over the words the trigger wrote down, timed, postings a word counted before and after; jit off; the one-row-per-word read checked to answer what the recorded one does for every end user before its timed writes; ${ROUNDS} rounds, the order of the layouts reversed each round`,
    message: MESSAGE,
    reply: REPLY,
    rounds,
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
  };
}
