import { Client } from 'pg';
import { MEMORY_RECALL_EN } from '../../test/fixtures/recall/memory-en';
import { buildRevision } from '../lib/build-revision';
import { freshDatabase, type RunningService, startService } from '../lib/service';
import { random, userMessage, userSentence } from './support/chat-text';
import { benchTenant } from './support/data-plane';
import { seedMemories } from './support/scale-seed';
import { loadAverages, timings } from './support/stats';

/**
 * `GET /v1/end-users/{id}/memories/search` of this tree against BENCH_BEFORE (the commit before
 * the search statement was prepared), two services on one database answering the same query in
 * turn (which of them first, at random), one request at a time: the difference is the code's,
 * not the machine's hour. The database: 100,000 memories, 20,000 of them one end user's chat,
 * 20,000 another's one sentence, 100 end users of 600; measured after VACUUM ANALYZE (as
 * autovacuum leaves it), then with the statistics of the tables read deleted (a database just
 * imported). Queries: a third each chat sentences, the recall set's questions, one or two words.
 */

const BEFORE = process.env.BENCH_BEFORE ?? '7fac18d';
const QUERIES = Number(process.env.BENCH_SEARCHES ?? 480);
const SAME_SENTENCE = 'I took my dog Rex to the park again today and he loved it, I love that dog.';
const READ_TABLES = ['memories', 'memory_terms', 'end_users', 'personalities', 'end_user_facts'];

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

interface Tenant {
  auth: string;
  personalityId: string;
}

async function search(
  service: RunningService,
  tenant: Tenant,
  userId: string,
  q: string,
  withPersonality: boolean,
): Promise<{ ms: number; ids: string }> {
  const url = new URL(`${service.baseUrl}/v1/end-users/${userId}/memories/search`);
  url.searchParams.set('q', q);
  if (withPersonality) url.searchParams.set('personality_id', tenant.personalityId);
  const startedAt = performance.now();
  const response = await fetch(url, { headers: { authorization: tenant.auth } });
  const body = (await response.json()) as Json;
  const ms = performance.now() - startedAt;
  if (response.status !== 200) throw new Error(`search: ${response.status}`);
  return { ms, ids: (body.data as Json[]).map((memory) => memory.id as string).join(',') };
}

function queries(): string[] {
  const next = random(20_261_202);
  const words = (text: string) => text.toLowerCase().match(/[a-z]{4,}/g) ?? ['work'];
  const list: string[] = [];
  for (let i = 0; list.length < QUERIES; i++) {
    list.push(userMessage(next));
    list.push(MEMORY_RECALL_EN[i % MEMORY_RECALL_EN.length].question);
    list.push(
      words(userSentence(next))
        .slice(0, 1 + (i % 2))
        .join(' '),
    );
  }
  return list.slice(0, QUERIES);
}

const CASES = [
  { name: 'heavy_user_with_personality_id', userId: 'search-heavy', withPersonality: true },
  { name: 'heavy_user_without_personality_id', userId: 'search-heavy', withPersonality: false },
  { name: 'same_sentence_user', userId: 'search-same', withPersonality: true },
  { name: 'ordinary_user', userId: 'search-user-3', withPersonality: true },
];

/** Every case, both services in turn per query: their timings, and answers that differed. */
async function sideBySide(before: RunningService, after: RunningService, tenant: Tenant) {
  const list = queries();
  const figures: Record<string, unknown> = {};
  let differing = 0;
  for (const { name, userId, withPersonality } of CASES) {
    const timed = { before: [] as number[], after: [] as number[] };
    for (const q of list) {
      const first = Math.random() < 0.5 ? 'before' : 'after';
      const answers: Record<string, { ms: number; ids: string }> = {};
      for (const which of first === 'before' ? ['before', 'after'] : ['after', 'before']) {
        answers[which] = await search(
          which === 'before' ? before : after,
          tenant,
          userId,
          q,
          withPersonality,
        );
        timed[which as 'before' | 'after'].push(answers[which].ms);
      }
      if (answers.before.ids !== answers.after.ids) differing += 1;
    }
    figures[name] = { before: timings(timed.before), this_tree: timings(timed.after) };
  }
  return { ...figures, answers_differing: differing, answers_compared: list.length * CASES.length };
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const previous = buildRevision(BEFORE);
  // One database for both, dropped at the end (a service started on a URL leaves it be).
  const database = await freshDatabase();
  const databaseUrl = database.url;
  let after: RunningService | undefined;
  let before: RunningService | undefined;
  try {
    after = await startService({ databaseUrl });
    const tenant = await benchTenant(after.baseUrl);
    const users = [
      { userId: 'search-heavy', personality: 0, memories: 20_000 },
      { userId: 'search-same', personality: 0, memories: 20_000, sentence: SAME_SENTENCE },
      ...Array.from({ length: 100 }, (_, i) => ({
        userId: `search-user-${i}`,
        personality: 0,
        memories: 600,
      })),
    ];
    // Written straight into the database, vacuumed and analysed (support/scale-seed.ts).
    await seedMemories(databaseUrl, tenant.organizationId, [tenant.personalityId], users, 7);
    before = await startService({ databaseUrl, main: previous.main });
    // Each session's first searches plan afresh (five custom plans before a generic one).
    for (const q of queries().slice(0, 40)) {
      await search(before, tenant, 'search-heavy', q, true);
      await search(after, tenant, 'search-heavy', q, true);
    }
    const analysed = await sideBySide(before, after, tenant);

    const db = new Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query(
        `DELETE FROM pg_statistic WHERE starelid IN (SELECT oid FROM pg_class WHERE relname = ANY($1))`,
        [READ_TABLES],
      );
      await db.query(
        `UPDATE pg_class SET reltuples = -1, relpages = 0 WHERE relname = ANY($1) AND relkind = 'r'`,
        [READ_TABLES],
      );
    } finally {
      await db.end();
    }
    // New sessions, so that no plan made with the statistics is kept.
    await Promise.all([before.stop(), after.stop()]);
    before = await startService({ databaseUrl, main: previous.main });
    after = await startService({ databaseUrl });
    const unanalysed = await sideBySide(before, after, tenant);

    return {
      load_average_at_start: loadAtStart,
      load_average_at_end: loadAverages(),
      before_revision: previous.revision,
      method: `two services on one database (${BEFORE} and this tree), one request at a time, each query sent to both in random order; ${QUERIES} queries (a third each: chat sentences, the recall set's questions, one or two words), limit 10; the database: 100,000 memories (20,000 of one end user's chat, 20,000 of one sentence, 100 end users of 600)`,
      after_vacuum_analyze: analysed,
      statistics_deleted: unanalysed,
    };
  } finally {
    await before?.stop();
    await after?.stop();
    await database.drop();
    previous.cleanup();
  }
}
