import type { TestingModule } from '@nestjs/testing';
import { Client } from 'pg';
import { DataSource } from 'typeorm';
import { Database } from '../../src/database/database';
import { PostingsCarryPersonalityAndLength1795920800000 } from '../../src/database/migrations/1795920800000-PostingsCarryPersonalityAndLength';
import { TrimPostingsWithinTheWindow1795921000000 } from '../../src/database/migrations/1795921000000-TrimPostingsWithinTheWindow';
import { TrimPostingsInTheBackground1795921500000 } from '../../src/database/migrations/1795921500000-TrimPostingsInTheBackground';
import { type Sql, sql, withEntries } from '../../src/database/sql';
import { MetricsService } from '../../src/metrics/metrics.service';
import { ConversationRepository } from '../../src/memory/conversation.repository';
import { ConversationService } from '../../src/memory/conversation.service';
import { FactsRepository } from '../../src/memory/facts.repository';
import { FactsService } from '../../src/memory/facts.service';
import { IdempotencyRepository } from '../../src/idempotency/idempotency.repository';
import {
  type BeginResult,
  type IdempotencyClaim,
  IdempotencyService,
} from '../../src/idempotency/idempotency.service';
import { MemoriesRepository } from '../../src/memory/memories.repository';
import { MemoriesService } from '../../src/memory/memories.service';
import { MemoryModule } from '../../src/memory/memory.module';
import { memoriesInsertStep } from '../../src/memory/memories.step';
import { rankedMemories } from '../../src/memory/memory-search';
import { questionSketch, sketchShortlist } from '../../src/embeddings/fusion';
import { PostingsTrimWorker } from '../../src/memory/postings-trim.worker';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { HeldTransaction, sessionsWaitingForLocks } from '../support/locks';
import { createFreshDatabase, type FreshDatabase } from '../support/fresh-database';
import { FakeEmbeddings } from '../support/fake-embeddings';
import { moduleAlone } from '../support/module-alone';
import { revertAndRerun } from '../support/migration-rerun';
import { REPLY_LIMITS, replyStatement } from '../../bench/scenarios/bounded-retrieval';
import { statementName } from '../../src/database/statement-name';

const HISTORY = 4;
const RECALL = 3;
const FACTS_LIMIT = 3;
/**
 * Recall's budget: long enough for a first, cold read (its session opened, its plan made, with
 * embeddings on the question embedded) on a loaded CI machine, where 50 ms once ran out; the tests
 * that spend it hold a lock past it.
 */
const RECALL_TIMEOUT_MS = 1_000;

/** The environment the module's configuration is read from, set only while it is compiled. */
const ENV = {
  ENGINE_HISTORY_MESSAGES: String(HISTORY),
  MEMORY_RECALL_LIMIT: String(RECALL),
  MEMORY_FACTS_LIMIT: String(FACTS_LIMIT),
  MEMORY_RECALL_TIMEOUT_MS: String(RECALL_TIMEOUT_MS),
  // The specs run the postings' trim themselves (trimNow), never beside one of the worker's.
  MEMORY_POSTINGS_TRIM_INTERVAL_MS: '3600000',
};

/**
 * The memory module alone on a real PostgreSQL, without HTTP ("medium" spec): what a reply is
 * written from (ConversationService) and the facts' rules (FactsService), called directly. The
 * test data is written by the statements the service writes it with (Factory#memories).
 */
describe('Memory module (real database)', () => {
  let moduleRef: TestingModule;
  let conversations: ConversationService;
  let facts: FactsService;
  let database: Database;

  beforeAll(async () => {
    moduleRef = await moduleAlone([MemoryModule], ENV);
    conversations = moduleRef.get(ConversationService);
    facts = moduleRef.get(FactsService);
    database = moduleRef.get(Database);
  });
  afterAll(() => moduleRef?.close());

  /** An organization with `personalities` personalities and these end users. */
  async function tenant(userIds: string[], personalities = 1) {
    const factory = new Factory(database);
    const organizationId = await factory.organization();
    const personalityIds: string[] = [];
    for (let index = 0; index < personalities; index++) {
      personalityIds.push(await factory.personality(organizationId, `Companion ${index}`));
    }
    const endUserIds: Record<string, string> = {};
    for (const userId of userIds)
      endUserIds[userId] = await factory.endUser(organizationId, userId);
    return { organizationId, personalityIds, endUserIds };
  }

  /** Memories of one end user with one personality, in the order given (Factory#memories). */
  async function remember(
    organizationId: string,
    endUserId: string,
    personalityId: string,
    contents: string[],
  ): Promise<void> {
    await new Factory(database).memories(organizationId, endUserId, personalityId, contents);
  }

  const limits = { history: HISTORY, recall: RECALL };

  describe('the conversation a reply is written from', () => {
    it('holds the latest memories oldest first, every fact, and older memories holding the message’s words', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['ada'], 2);
      const [companion, other] = personalityIds;
      await remember(organizationId, endUserIds.ada, companion, [
        'My sister Clara plays the cello',
        'What a lovely instrument',
        'I walked the dog in the park',
        'Dogs love parks',
        'Clara has a concert on Friday',
        'Good luck to her',
        'I had soup for lunch',
        'Soup is warming',
      ]);
      // Another personality's memory of the same words is never this conversation's.
      await remember(organizationId, endUserIds.ada, other, ['Clara and the cello again']);
      await facts.create(organizationId, 'ada', 'Has a sister called Clara');
      await facts.create(organizationId, 'ada', 'Owns a dog');

      // As a reply reads it: ENGINE_HISTORY_MESSAGES of history, MEMORY_RECALL_LIMIT recalled.
      const found = await conversations.readReplyContext({
        organizationId,
        userId: 'ada',
        personalityId: companion,
        message: 'How is Clara doing with the cello?',
      });

      expect(found.endUser).toEqual({
        id: endUserIds.ada,
        organization_id: organizationId,
        user_id: 'ada',
        status: 'active',
      });
      expect(found.history!.map((memory) => memory.content)).toEqual([
        'Clara has a concert on Friday',
        'Good luck to her',
        'I had soup for lunch',
        'Soup is warming',
      ]);
      expect(found.facts).toEqual(['Has a sister called Clara', 'Owns a dog']);
      // Only memories older than the history; the one holding both words first.
      expect(found.recalled!.map((memory) => memory.content)).toEqual([
        'My sister Clara plays the cello',
      ]);
      expect(found.recalled![0]).toEqual({
        role: 'user',
        content: 'My sister Clara plays the cello',
        created_at: '2031-03-01T10:00:00.000Z',
      });
    });

    it('is the statement bench bounded-retrieval times, captured under the name it is prepared with', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['bo']);
      await remember(organizationId, endUserIds.bo, personalityIds[0], [
        'My sister Clara plays the cello',
        'Nice',
        ...Array.from({ length: REPLY_LIMITS.history }, (_, index) => `Small talk number ${index}`),
      ]);
      const message = 'How is Clara with her cello?';
      const statement = await replyStatement(organizationId, 'bo', personalityIds[0], message);
      expect(statement.name).toBe(statementName(statement.text));
      const client = new Client({ connectionString: process.env.DATABASE_URL });
      await client.connect();
      try {
        const { rows } = await client.query<{ recalled: unknown[]; history: unknown[] }>(statement);
        const served = await moduleRef
          .get(ConversationRepository)
          .findConversationRecalling(
            organizationId,
            'bo',
            personalityIds[0],
            message,
            REPLY_LIMITS,
            0,
          );
        expect(served.recalled.map((memory) => memory.content)).toEqual([
          'My sister Clara plays the cello',
        ]);
        expect(rows).toHaveLength(1);
        expect(rows[0].recalled).toEqual(served.recalled);
        expect(rows[0].history).toEqual(served.history);
      } finally {
        await client.end();
      }
    });

    it('never reads another organization’s end user of the same user_id', async () => {
      const mine = await tenant(['shared-id']);
      const theirs = await tenant(['shared-id']);
      await remember(
        theirs.organizationId,
        theirs.endUserIds['shared-id'],
        theirs.personalityIds[0],
        ['The secret word is marmalade', 'Noted', 'x', 'y', 'z', 'w'],
      );
      await facts.create(theirs.organizationId, 'shared-id', 'Likes marmalade');

      const found = await conversations.findConversation(
        mine.organizationId,
        'shared-id',
        // Even given the other organization's personality.
        theirs.personalityIds[0],
        'What is the secret word? marmalade',
        limits,
      );
      expect(found.endUser?.id).toBe(mine.endUserIds['shared-id']);
      expect(found).toMatchObject({ history: [], facts: [], recalled: [] });
    });

    it('finds no end user and nothing remembered for an unknown user_id', async () => {
      const { organizationId, personalityIds } = await tenant([]);
      await expect(
        conversations.findConversation(
          organizationId,
          'nobody',
          personalityIds[0],
          'hello',
          limits,
        ),
      ).resolves.toEqual({ endUser: undefined, history: [], facts: [], recalled: [] });
    });

    it('recalls nothing with a recall limit of 0', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['bo']);
      await remember(organizationId, endUserIds.bo, personalityIds[0], [
        'Paris in the spring',
        'a',
        'b',
        'c',
        'd',
      ]);
      const found = await conversations.findConversation(
        organizationId,
        'bo',
        personalityIds[0],
        'Paris',
        { history: HISTORY, recall: 0 },
      );
      expect(found.history).toHaveLength(HISTORY);
      expect(found.recalled).toEqual([]);
    });

    it('goes on without recall when it runs past MEMORY_RECALL_TIMEOUT_MS, and counts it', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['cy']);
      await remember(organizationId, endUserIds.cy, personalityIds[0], [
        'Rome in the summer',
        'a',
        'b',
        'c',
        'd',
      ]);
      const metrics = moduleRef.get(MetricsService);
      const timeouts = async () =>
        (await metrics.registry.getSingleMetric('memory_recall_timeouts_total')?.get())?.values[0]
          ?.value ?? 0;
      const before = await timeouts();
      // Another session holds the table recall ranks by: recall waits past its budget.
      const blocker = new Client({ connectionString: process.env.DATABASE_URL });
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE memory_terms IN ACCESS EXCLUSIVE MODE');
        const started = Date.now();
        const found = await conversations.findConversation(
          organizationId,
          'cy',
          personalityIds[0],
          'Rome',
          limits,
        );
        expect(Date.now() - started).toBeLessThan(RECALL_TIMEOUT_MS + 2_000);
        expect(found.history).toHaveLength(HISTORY);
        expect(found.recalled).toEqual([]);
        expect(await timeouts()).toBe(before + 1);
      } finally {
        await blocker.query('ROLLBACK');
        await blocker.end();
      }
      // Once the table is free, the same read recalls.
      const again = await conversations.findConversation(
        organizationId,
        'cy',
        personalityIds[0],
        'Rome',
        limits,
      );
      expect(again.recalled.map((memory) => memory.content)).toEqual(['Rome in the summer']);
    });
  });

  describe('with embeddings on', () => {
    let embeddings: FakeEmbeddings;
    let withMeaning: TestingModule;

    beforeAll(async () => {
      embeddings = new FakeEmbeddings();
      await embeddings.start();
      withMeaning = await moduleAlone([MemoryModule], {
        ...ENV,
        EMBEDDINGS_MODEL: 'fake-embedding',
        EMBEDDINGS_BASE_URL: embeddings.url,
        EMBEDDINGS_API_KEY: 'test',
      });
    });
    afterAll(async () => {
      await withMeaning?.close();
      await embeddings?.stop();
    });

    // Recall is a statement of its own there, beside the history's read (conversation.service).
    it('reads the history apart from recall, and goes on without recall past its budget', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['eve']);
      await remember(organizationId, endUserIds.eve, personalityIds[0], [
        'Lisbon in the autumn',
        'a',
        'b',
        'c',
        'd',
      ]);
      const service = withMeaning.get(ConversationService);
      const read = () =>
        service.findConversation(organizationId, 'eve', personalityIds[0], 'Lisbon', limits);
      const metrics = withMeaning.get(MetricsService);
      const timeouts = async () =>
        (await metrics.registry.getSingleMetric('memory_recall_timeouts_total')?.get())?.values[0]
          ?.value ?? 0;
      expect((await read()).recalled.map((memory) => memory.content)).toEqual([
        'Lisbon in the autumn',
      ]);
      expect(embeddings.inputs).toContain('Lisbon');
      const before = await timeouts();
      const blocker = new Client({ connectionString: process.env.DATABASE_URL });
      await blocker.connect();
      try {
        await blocker.query('BEGIN');
        await blocker.query('LOCK TABLE memory_terms IN ACCESS EXCLUSIVE MODE');
        const found = await read();
        expect(found.history).toHaveLength(HISTORY);
        expect(found.recalled).toEqual([]);
        expect(await timeouts()).toBe(before + 1);
      } finally {
        await blocker.query('ROLLBACK');
        await blocker.end();
      }
    });
  });

  describe("the sketches' shortlist (recall by meaning)", () => {
    it('keeps the sketches nearest by the asymmetric estimate, as questionSketch counts it', async () => {
      const dimensions = 32;
      const vector = (seed: number) =>
        Array.from({ length: dimensions }, (_, i) => Math.sin(seed * 7.1 + i * 1.3 + (i % 3)));
      const candidates = Array.from({ length: 60 }, (_, k) => vector(k + 2));
      const question = vector(1);
      // The candidates' sketches as the tables' trigger writes them (embedding_sketch).
      const sketches = sql`
        SELECT e.ordinality AS id,
               embedding_sketch(ARRAY(SELECT jsonb_array_elements_text(e.value)::real)) AS sketch
          FROM jsonb_array_elements(${JSON.stringify(candidates)}::jsonb) WITH ORDINALITY e`;
      const meaning = {
        model: 'm',
        vector: question,
        candidates: 100,
        minSimilarity: 0,
        wholeVectors: 'array' as const,
      };
      const statement = sketchShortlist(sketches, meaning, 0);
      const client = new Client({ connectionString: process.env.DATABASE_URL });
      await client.connect();
      const { rows } = await client
        .query<{ id: string }>(statement.text, statement.values as unknown[])
        .finally(() => client.end());
      // The same ordering counted here: the question's levels where the candidate's sign is set.
      const { planes } = questionSketch(question);
      const estimate = (candidate: number[]) =>
        candidate.reduce((sum, x, i) => {
          if (x <= 0) return sum;
          const level = planes.reduce((l, plane, bit) => l + (plane[i] === '1' ? 1 << bit : 0), 0);
          return sum + 2 * level - 15;
        }, 0);
      const expected = candidates
        .map((candidate, k) => ({ id: k + 1, estimate: estimate(candidate) }))
        .sort((a, b) => b.estimate - a.estimate || b.id - a.id)
        .slice(0, 40)
        .map(({ id }) => String(id));
      expect(rows.map((row) => row.id)).toEqual(expected);
      // Not the order of the Hamming distance alone.
      const hamming = (candidate: number[]) =>
        candidate.filter((x, i) => x > 0 !== question[i] > 0).length;
      const byHamming = candidates
        .map((candidate, k) => ({ id: k + 1, distance: hamming(candidate) }))
        .sort((a, b) => a.distance - b.distance || b.id - a.id)
        .map(({ id }) => String(id));
      expect(rows.map((row) => row.id)).not.toEqual(byHamming.slice(0, 40));
    });
  });

  describe('postings (memory_terms), what ranking reads', () => {
    /** Every posting of the end user with what its memory says, where the two disagree. */
    async function postingsDisagreeing(endUserId: string) {
      return database.rows<{ memory_id: string }>(
        sql`SELECT t.memory_id::text FROM memory_terms t JOIN memories m ON m.id = t.memory_id
             WHERE t.end_user_id = ${endUserId}
               AND (t.personality_id IS DISTINCT FROM m.personality_id
                    OR t.memory_length IS DISTINCT FROM length(m.search))`,
      );
    }

    it('carry the memory’s personality and length, written before the migration or after', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['dee'], 2);
      const migration = new PostingsCarryPersonalityAndLength1795920800000();
      // Written by the previous trigger, into postings without the columns.
      await revertAndRerun(
        moduleRef.get(DataSource),
        migration,
        async () => {
          await remember(organizationId, endUserIds.dee, personalityIds[0], [
            'My kayak is red.',
            'A short one.',
          ]);
          await remember(organizationId, endUserIds.dee, personalityIds[1], [
            'The kayak club meets on Sundays by the old harbour wall.',
          ]);
        },
        // Its up() writes the trigger with the trim of its day: the current one is put back.
        [
          new TrimPostingsWithinTheWindow1795921000000(),
          new TrimPostingsInTheBackground1795921500000(),
        ],
      );
      await remember(organizationId, endUserIds.dee, personalityIds[1], ['Kayak again.']);
      const [{ postings, carried }] = await database.rows<{ postings: number; carried: number }>(
        sql`SELECT count(*)::int AS postings,
                   count(*) FILTER (WHERE personality_id IS NOT NULL)::int AS carried
              FROM memory_terms WHERE end_user_id = ${endUserIds.dee}`,
      );
      expect(postings).toBeGreaterThan(10);
      expect(carried).toBe(postings);
      expect(await postingsDisagreeing(endUserIds.dee)).toEqual([]);
      // In the primary key's index, so that a ranking reads them from the index alone.
      const [{ included }] = await database.rows<{ included: string[] }>(
        sql`SELECT array_agg(a.attname::text ORDER BY k.n) AS included
              FROM pg_index i
             CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
              JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
             WHERE i.indexrelid = 'memory_terms_pkey'::regclass AND k.n > i.indnkeyatts`,
      );
      expect(included).toEqual(['personality_id', 'memory_length']);
      // Each personality recalls its own.
      const found = await conversations.findConversation(
        organizationId,
        'dee',
        personalityIds[1],
        'kayak',
        { history: 0, recall: RECALL },
      );
      expect(found.recalled.map((memory) => memory.content)).toEqual([
        'Kayak again.',
        'The kayak club meets on Sundays by the old harbour wall.',
      ]);
    });

    it('go with their memory, forgotten alone or with its personality or end user, and no other’s do', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['hal', 'ivy'], 2);
      const [first, other] = personalityIds;
      const hal = await new Factory(database).memories(organizationId, endUserIds.hal, first, [
        'Kayak by the lighthouse.',
        'The kayak is red.',
      ]);
      await remember(organizationId, endUserIds.hal, other, ['Kayak with the other one.']);
      await remember(organizationId, endUserIds.ivy, first, ['My kayak is blue.']);
      /** Postings by end user, and those whose memory is gone. */
      const postings = async () => {
        const [row] = await database.rows<{ hal: number; ivy: number; orphans: number }>(
          sql`SELECT count(*) FILTER (WHERE t.end_user_id = ${endUserIds.hal})::int AS hal,
                     count(*) FILTER (WHERE t.end_user_id = ${endUserIds.ivy})::int AS ivy,
                     count(*) FILTER (WHERE NOT EXISTS (
                       SELECT FROM memories m WHERE m.id = t.memory_id))::int AS orphans
                FROM memory_terms t
               WHERE t.end_user_id IN (${endUserIds.hal}, ${endUserIds.ivy})`,
        );
        return row;
      };
      const before = await postings();
      expect(before.hal).toBeGreaterThan(4);
      expect(before.ivy).toBeGreaterThan(1);

      // Forgotten one by one, as DELETE /v1/memories/:id does.
      await database.rows(sql`DELETE FROM memories WHERE id = ${hal[0].id}`);
      const forgotten = await postings();
      expect(forgotten.orphans).toBe(0);
      expect(forgotten.hal).toBeLessThan(before.hal);
      // With their personality, then with their end user: the deletes cascade to memories.
      await database.rows(sql`DELETE FROM personalities WHERE id = ${other}`);
      expect((await postings()).orphans).toBe(0);
      await database.rows(sql`DELETE FROM end_users WHERE id = ${endUserIds.hal}`);
      expect(await postings()).toEqual({ hal: 0, ivy: before.ivy, orphans: 0 });
    });

    describe('past a word’s 64 when replies are written at once', () => {
      const sentence = 'Rex fetched the red ball again';
      const words = ['ball', 'fetch', 'red', 'rex'];
      const eachWord = (n: number) => words.map((lexeme) => ({ lexeme, n }));

      /** An end user whose every word holds 64 postings, and what to look at and write with. */
      async function wordsAtTheirWindow(userId: string) {
        const { organizationId, personalityIds, endUserIds } = await tenant([userId]);
        const [companion] = personalityIds;
        const endUserId = endUserIds[userId];
        await remember(organizationId, endUserId, companion, Array(70).fill(sentence));
        const waiting = async () =>
          (
            await database.rows<{ lexeme: string }>(
              sql`SELECT DISTINCT lexeme FROM memory_terms_to_trim WHERE end_user_id = ${endUserId}
                   ORDER BY lexeme`,
            )
          ).map((row) => row.lexeme);
        /** Postings a word: one count for all, as each memory holds every word. */
        const perWord = () =>
          database.rows<{ lexeme: string; n: number }>(
            sql`SELECT lexeme, count(*)::int AS n FROM memory_terms WHERE end_user_id = ${endUserId}
                 GROUP BY lexeme ORDER BY lexeme`,
          );
        const reply = () => remember(organizationId, endUserId, companion, [sentence]);
        /** A reply's statement on a connection of its own, which a spec keeps open. */
        const openReply = async () => {
          const insert = withEntries(
            [
              memoriesInsertStep([
                {
                  organizationId,
                  endUserId,
                  personalityId: companion,
                  role: 'user',
                  content: sentence,
                  emotion: null,
                  intensity: null,
                  vocabularyVersion: null,
                  createdAt: new Date('2031-03-02T10:00:00Z'),
                  safety: null,
                },
              ]),
            ],
            sql`SELECT 1`,
          );
          const client = new Client({ connectionString: process.env.DATABASE_URL });
          await client.connect();
          await client.query('BEGIN');
          await client.query(insert.text, insert.values as unknown[]);
          return {
            commit: async () => {
              await client.query('COMMIT');
              await client.end();
            },
          };
        };
        /** Two replies at once: the first holds the postings it trims while the second trims. */
        const twoAtOnce = async () => {
          const first = await openReply();
          try {
            await reply();
          } finally {
            await first.commit();
          }
        };
        return { endUserId, waiting, perWord, reply, openReply, twoAtOnce };
      }

      it('are written down by the reply that could not trim them, and the worker trims them', async () => {
        const { endUserId, waiting, perWord, reply, twoAtOnce } = await wordsAtTheirWindow('kit');
        // One at a time, each reply trims what it adds: nothing waits.
        await reply();
        expect(await perWord()).toEqual(eachWord(64));
        expect(await waiting()).toEqual([]);

        // Two at once: the first holds the postings past the 64 it picked until it commits; the
        // second picks the same ones, skips them, and writes its words down.
        for (const round of [1, 2]) {
          await twoAtOnce();
          expect(await perWord()).toEqual(eachWord(64 + round));
          expect(await waiting()).toEqual(words);
        }
        // Once a word, the second time too: a word already waiting is not written again.
        const [{ rows }] = await database.rows<{ rows: number }>(
          sql`SELECT count(*)::int AS rows FROM memory_terms_to_trim WHERE end_user_id = ${endUserId}`,
        );
        expect(rows).toBe(words.length);

        const worker = moduleRef.get(PostingsTrimWorker);
        // Trimmed, and written down again to be looked at once more: no row let go.
        expect(await worker.trimNow()).toBe(0);
        expect(await perWord()).toEqual(eachWord(64));
        expect(await waiting()).toEqual(words);
        // Let go when a look finds nothing past the 64.
        expect(await worker.trimNow()).toBe(words.length);
        expect(await waiting()).toEqual([]);
        // The newest 64 memories' postings are those kept.
        const [{ oldestKept }] = await database.rows<{ oldestKept: string }>(
          sql`SELECT min(memory_id)::text AS "oldestKept" FROM memory_terms
               WHERE end_user_id = ${endUserId}`,
        );
        const memories = await database.rows<{ id: string }>(
          sql`SELECT m.id::text FROM memories m WHERE m.end_user_id = ${endUserId} ORDER BY m.id DESC`,
        );
        expect(oldestKept).toBe(memories[63].id);
      });

      it('are looked at again when another transaction held some of them while the worker trimmed', async () => {
        const { endUserId, waiting, perWord, twoAtOnce } = await wordsAtTheirWindow('max');
        await twoAtOnce();
        await twoAtOnce();
        expect(await perWord()).toEqual(eachWord(66));
        // A forget of the memory holding the oldest postings, open while the worker runs, then
        // rolled back: the worker skipped the postings it held, which are back past the 64.
        const forget = new Client({ connectionString: process.env.DATABASE_URL });
        await forget.connect();
        const worker = moduleRef.get(PostingsTrimWorker);
        try {
          await forget.query('BEGIN');
          await forget.query(
            `DELETE FROM memories WHERE id = (SELECT min(memory_id) FROM memory_terms
                                               WHERE end_user_id = $1)`,
            [endUserId],
          );
          // Every word had postings past its 64: each is written down again, none let go.
          expect(await worker.trimNow()).toBe(0);
          await forget.query('ROLLBACK');
        } finally {
          await forget.end();
        }
        expect(await perWord()).toEqual(eachWord(65));
        expect(await waiting()).toEqual(words);
        await worker.trimNow();
        expect(await perWord()).toEqual(eachWord(64));
      });

      it('migration TrimPostingsInTheBackground runs again over what the trigger before it wrote', async () => {
        const { organizationId, personalityIds, endUserIds } = await tenant(['lou']);
        await revertAndRerun(
          moduleRef.get(DataSource),
          new TrimPostingsInTheBackground1795921500000(),
          () =>
            remember(organizationId, endUserIds.lou, personalityIds[0], Array(66).fill('Kayak.')),
        );
        await remember(organizationId, endUserIds.lou, personalityIds[0], ['Kayak again.']);
        const [{ n }] = await database.rows<{ n: number }>(
          sql`SELECT count(*)::int AS n FROM memory_terms
             WHERE end_user_id = ${endUserIds.lou} AND lexeme = 'kayak'`,
        );
        expect(n).toBe(64);
        // Its trigger and table, as the first test of this group finds them.
        const { waiting, twoAtOnce } = await wordsAtTheirWindow('lou-again');
        await twoAtOnce();
        expect(await waiting()).toEqual(words);
      });
    });

    it('are read once a word over personalities of many languages, as deep as over one', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['fay']);
      // Five more personalities, each of another language: a search over every personality
      // reads the text's lexemes in six languages, most of them the same words.
      for (const config of ['french', 'german', 'spanish', 'italian', 'simple']) {
        const id = await new Factory(database).personality(organizationId, config);
        await database.rows(
          sql`UPDATE personalities SET search_config = ${config} WHERE id = ${id}`,
        );
      }
      await remember(
        organizationId,
        endUserIds.fay,
        personalityIds[0],
        Array.from({ length: 60 }, (_, index) => `Kayak trip number ${index}.`),
      );
      // Eight words: each reads POSTINGS_PER_WORD of the end user's latest postings.
      const found = async (personalityId: string | null) =>
        (
          await database.rows<{ id: string }>(
            rankedMemories({
              organizationId,
              endUserId: sql`${endUserIds.fay}::uuid`,
              personalityId,
              text: 'kayak canoe paddle river lake rapids portage eddy',
              limit: 100,
            }),
          )
        ).length;
      expect(await found(personalityIds[0])).toBe(60);
      expect(await found(null)).toBe(60);
    });

    it('cannot make a reply recall another personality’s memory, should one disagree with its memory', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['gus'], 2);
      await remember(organizationId, endUserIds.gus, personalityIds[0], ['My kayak is a secret.']);
      // A posting naming the wrong personality (no writer does this; the final read checks it).
      await database.rows(
        sql`UPDATE memory_terms SET personality_id = ${personalityIds[1]}
             WHERE end_user_id = ${endUserIds.gus}`,
      );
      const found = await conversations.findConversation(
        organizationId,
        'gus',
        personalityIds[1],
        'kayak',
        { history: 0, recall: RECALL },
      );
      expect(found.recalled).toEqual([]);
    });

    it('rank the candidates without reading a memory', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['eve']);
      await remember(
        organizationId,
        endUserIds.eve,
        personalityIds[0],
        Array.from({ length: 40 }, (_, index) => `Kayak trip number ${index}.`),
      );
      const ranking = rankedMemories({
        organizationId,
        endUserId: sql`${endUserIds.eve}::uuid`,
        personalityId: personalityIds[0],
        text: 'kayak',
        limit: RECALL,
      });
      const client = await database.pool.connect();
      try {
        // Scans of memories, by an index or whole, by this session (counts not yet reported).
        const scans = async () =>
          (
            await client.query<{ n: number }>(
              `SELECT (idx_scan + seq_scan)::int AS n FROM pg_stat_xact_user_tables
                WHERE relname = 'memories'`,
            )
          ).rows[0].n;
        await client.query('BEGIN');
        const before = await scans();
        const { rows } = await client.query<{ id: string }>(ranking);
        expect(rows).toHaveLength(RECALL);
        expect((await scans()) - before).toBe(0);
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    });
  });

  describe('on tables without statistics, and with them', () => {
    const SENTENCE = 'I took my dog Rex to the park again today, I love that dog.';
    let fresh: FreshDatabase;
    let alone: TestingModule;
    let data: Database;
    let seeded: { organizationId: string; personalityId: string; endUserId: string };

    // A new database: its tables have never been analysed, as after an import or a restore.
    beforeAll(async () => {
      fresh = await createFreshDatabase('memory_plans', process.env.DATABASE_URL);
      alone = await moduleAlone([MemoryModule], { ...ENV, DATABASE_URL: fresh.url });
      data = alone.get(Database);
      const factory = new Factory(data);
      const organizationId = await factory.organization();
      const personalityId = await factory.personality(organizationId, 'Companion');
      const endUserId = await factory.endUser(organizationId, 'rex-owner');
      await factory.memories(
        organizationId,
        endUserId,
        personalityId,
        Array.from({ length: 600 }, () => SENTENCE),
      );
      seeded = { organizationId, personalityId, endUserId };
    });
    afterAll(async () => {
      await alone?.close();
      await fresh?.drop();
    });

    /** The statement a repository call sends, captured instead of run. */
    async function captured(call: (database: Database) => Promise<unknown>): Promise<Sql> {
      let statement: Sql | undefined;
      const recorder = {
        rows: (sent: Sql) => ((statement = sent), Promise.resolve([])),
        rowsWithin: (sent: Sql) => ((statement = sent), Promise.resolve([])),
      } as unknown as Database;
      await call(recorder);
      return statement!;
    }

    /** Rows of `memories` the statement fetched by index (this session's, not yet reported). */
    async function memoriesFetched(
      statement: Sql,
      setting?: string,
    ): Promise<{ rows: number; fetched: number }> {
      const client = await data.pool.connect();
      const fetched = async () =>
        (
          await client.query<{ n: number }>(
            `SELECT idx_tup_fetch::int AS n FROM pg_stat_xact_user_tables WHERE relname = 'memories'`,
          )
        ).rows[0].n;
      try {
        await client.query('BEGIN');
        if (setting) await client.query(`SET LOCAL ${setting}`);
        const before = await fetched();
        const { rows } = await client.query(statement.text, [...statement.values]);
        return { rows: rows.length, fetched: (await fetched()) - before };
      } finally {
        await client.query('ROLLBACK');
        client.release();
      }
    }

    // Each ranked memory is one lookup by id. Joined plainly, without statistics the planner read
    // the end user's whole conversation for each (3 x 600 rows): replies slowed as history grew.
    // The history and recall's bound below it are the end user's latest memories: read along the
    // index and stopped there, never all of them then sorted (a bitmap scan, which a table without
    // statistics made a near tie; forced here by a session that will not scan an index).
    it.each([
      ['without statistics', undefined],
      ['in a session that will not scan an index', 'enable_indexscan = off'],
      ['after ANALYZE', undefined],
    ])(
      'recall and search read each ranked memory by its id and the history by index, %s',
      async (state, setting) => {
        if (state === 'after ANALYZE') await data.rows(sql`ANALYZE memories`);
        const { organizationId, personalityId, endUserId } = seeded;
        const recall = await captured((recorder) =>
          new ConversationRepository(recorder).findConversationRecalling(
            organizationId,
            'rex-owner',
            personalityId,
            'my dog Rex',
            limits,
            1_000,
          ),
        );
        const search = await captured((recorder) =>
          new MemoriesRepository(recorder).search(
            organizationId,
            endUserId,
            'my dog Rex',
            personalityId,
            RECALL,
            null,
          ),
        );
        const [recalled] = await data.rows<{ recalled: unknown[] }>(recall);
        expect(recalled.recalled).toHaveLength(RECALL);
        // The history (4), the bound below it and the recalled (3), not the conversation.
        expect((await memoriesFetched(recall, setting)).fetched).toBeLessThan(60);
        const searched = await memoriesFetched(search, setting);
        expect(searched.rows).toBe(RECALL);
        expect(searched.fetched).toBeLessThan(60);
      },
    );

    // Last: it deletes what the cases above read.
    it('takes the postings of deleted memories by key, not by reading the end user’s; TRUNCATE too', async () => {
      const { organizationId, personalityId } = seeded;
      const factory = new Factory(data);
      // 3,000 memories of six words of their own and "note": 18,064 postings ("note" keeps 64).
      const endUserId = await factory.endUser(organizationId, 'wordy');
      const written = await factory.memories(
        organizationId,
        endUserId,
        personalityId,
        Array.from(
          { length: 3_000 },
          (_, i) => `Note alpha${i} beta${i} gamma${i} delta${i} epsilon${i} zeta${i}`,
        ),
      );
      const client = await data.pool.connect();
      const newest = written.slice(-50).map((memory) => memory.id);
      /** The end user's postings, and those of the newest 50 memories. */
      const postings = async () =>
        (
          await client.query<{ all: number; newest: number }>(
            `SELECT count(*)::int AS all,
                    count(*) FILTER (WHERE memory_id = ANY($2::bigint[]))::int AS newest
               FROM memory_terms WHERE end_user_id = $1`,
            [endUserId, newest],
          )
        ).rows[0];
      // This session's counts, as deltas: PostgreSQL 15 keeps earlier transactions' in them until
      // it reports them.
      const reads = async () =>
        (
          await client.query<{ seq: number; blocks: number }>(
            `SELECT (SELECT seq_scan::int FROM pg_stat_xact_user_tables
                      WHERE relname = 'memory_terms') AS seq,
                    pg_stat_get_xact_blocks_fetched('memory_terms_pkey'::regclass)::int AS blocks`,
          )
        ).rows[0];
      try {
        const held = await postings();
        expect(held.all).toBeGreaterThan(15_000);
        expect(held.newest).toBeGreaterThan(50 * 5);
        await client.query('BEGIN');
        const before = await reads();
        await client.query('DELETE FROM memories WHERE id = ANY($1::bigint[])', [newest]);
        const after = await reads();
        await client.query('COMMIT');
        expect(await postings()).toEqual({ all: held.all - held.newest, newest: 0 });
        // A probe of the primary key a lexeme (7 a memory, a few blocks each). Read as a filter
        // over the end user's postings, as `lexeme = ANY (...)` was without statistics, each
        // memory read all of their index entries: more than 100 blocks.
        expect(after.seq - before.seq).toBe(0);
        expect(after.blocks - before.blocks).toBeLessThan(50 * 7 * 4);

        await client.query('TRUNCATE memories CASCADE');
        expect((await postings()).all).toBe(0);
      } finally {
        client.release();
      }
    });
  });

  describe('forgetting a message', () => {
    /** One exchange as a reply stores it: the message and the reply, one instant, one statement. */
    async function exchange(
      at: { organizationId: string; endUserId: string; personalityId: string },
      message: string,
      reply: string,
      createdAt: Date,
      toolCalls: unknown[] | null = null,
    ): Promise<void> {
      const common = { ...at, emotion: null, intensity: null, vocabularyVersion: null, createdAt };
      await database.rows(
        withEntries(
          [
            memoriesInsertStep([
              { ...common, role: 'user', content: message, safety: null },
              { ...common, role: 'personality', content: reply, safety: null, toolCalls },
            ]),
          ],
          sql`SELECT 1`,
        ),
      );
    }

    async function conversationOf(endUserId: string) {
      return database.rows<{ id: string; role: string; content: string; tool_calls: unknown }>(
        sql`SELECT m.id::text AS id, m.role, m.content, m.tool_calls FROM memories m
             WHERE m.end_user_id = ${endUserId} ORDER BY m.id`,
      );
    }

    async function forget(organizationId: string, userId: string, content: string) {
      const [endUserId] = (
        await database.rows<{ id: string }>(
          sql`SELECT m.id::text AS id FROM memories m JOIN end_users e ON e.id = m.end_user_id
               WHERE e.user_id = ${userId} AND e.organization_id = ${organizationId}
                 AND m.role = 'user' AND m.content = ${content} ORDER BY m.id LIMIT 1`,
        )
      ).map((row) => row.id);
      await moduleRef.get(MemoriesService).forget(organizationId, userId, endUserId);
    }

    /**
     * An end user's conversation saying `secret` twice, each copy answered, and after each a reply
     * quoting it: the one after the second may be quoting either.
     */
    async function saidTwice(userId: string, secret: string) {
      const { organizationId, personalityIds, endUserIds } = await tenant([userId]);
      const at = {
        organizationId,
        endUserId: endUserIds[userId],
        personalityId: personalityIds[0],
      };
      const minute = (n: number) => new Date(Date.parse('2031-03-01T10:00:00Z') + n * 60_000);
      await exchange(at, secret, 'Noted.', minute(0));
      await exchange(at, 'anything new?', `You said "${secret}".`, minute(1));
      await exchange(at, secret, 'Noted again.', minute(2));
      await exchange(at, 'and now?', `You said "${secret}" twice.`, minute(3));
      return { organizationId, at };
    }

    it('forgets the replies quoting it in any quotation marks, or none (review)', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['ivo']);
      const at = { organizationId, endUserId: endUserIds.ivo, personalityId: personalityIds[0] };
      const secret = 'My favourite colour is heliotrope';
      await exchange(at, secret, 'Noted.', new Date('2031-03-01T10:00:00Z'));
      // A business's recall sentences (replies.recall): no marks, guillemets, corner brackets.
      await exchange(
        at,
        'hello',
        `Earlier, you told me ${secret}.`,
        new Date('2031-03-01T10:01:00Z'),
      );
      await exchange(at, 'salut', `Tu m'as dit « ${secret} ».`, new Date('2031-03-01T10:02:00Z'));
      await exchange(at, 'yo', `You said 「${secret}」.`, new Date('2031-03-01T10:03:00Z'));
      await exchange(at, 'and?', 'My favourite colour is blue.', new Date('2031-03-01T10:04:00Z'));
      await forget(organizationId, 'ivo', secret);
      expect((await conversationOf(at.endUserId)).map((m) => m.content)).toEqual([
        'Noted.',
        'hello',
        'salut',
        'yo',
        'and?',
        'My favourite colour is blue.',
      ]);
    });

    it('forgets, with each of two copies, the replies that can only be quoting that copy (review)', async () => {
      const secret = 'My secret word is marmalade';
      const { organizationId, at } = await saidTwice('ola', secret);
      // The first copy: the reply before the second can only quote it; the one after may quote
      // the second, which stays, and so does that reply.
      await forget(organizationId, 'ola', secret);
      expect((await conversationOf(at.endUserId)).map((m) => m.content)).toEqual([
        'Noted.',
        'anything new?',
        secret,
        'Noted again.',
        'and now?',
        `You said "${secret}" twice.`,
      ]);
      // Before, the reply between the two stayed once both were forgotten oldest first.
      await forget(organizationId, 'ola', secret);
      expect(JSON.stringify(await conversationOf(at.endUserId))).not.toContain('marmalade');
    });

    it('forgets both copies at once as it does one after the other: each sees the other gone (review)', async () => {
      const secret = 'My secret word is quince';
      const { organizationId, at } = await saidTwice('pia', secret);
      await new Factory(database).engineFact(organizationId, at.endUserId, `User said: ${secret}.`);
      const copies = (await conversationOf(at.endUserId))
        .filter((memory) => memory.content === secret)
        .map((memory) => memory.id);
      expect(copies).toHaveLength(2);
      // Both forgets held at the end user's row until both have started, so neither has deleted
      // its copy when the other reads: before, each statement's snapshot predated the other's
      // deletion, each kept what the other copy might be quoting, and the second reply and the
      // fact outlived both copies.
      const holding = await HeldTransaction.begin();
      let forgets: Promise<void[]> | undefined;
      try {
        await holding.run('SELECT 1 FROM end_users WHERE id = $1 FOR UPDATE', [at.endUserId]);
        forgets = Promise.all(
          copies.map((id) => moduleRef.get(MemoriesService).forget(organizationId, 'pia', id)),
        );
        await sessionsWaitingForLocks(database, 2);
        await holding.commit();
      } finally {
        await holding.end();
      }
      await forgets;
      expect(JSON.stringify(await conversationOf(at.endUserId))).not.toContain('quince');
      expect(
        await database.rows(
          sql`SELECT content FROM end_user_facts WHERE end_user_id = ${at.endUserId}`,
        ),
      ).toEqual([]);
    });

    it('forgets a fact another exchange learned holding its words, unless another message says them (review)', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['ren']);
      const at = { organizationId, endUserId: endUserIds.ren, personalityId: personalityIds[0] };
      const secret = 'My therapist is Dr Ames';
      const said = 'I have a cat called Miso';
      await exchange(at, secret, 'Noted.', new Date('2031-03-01T10:00:00Z'));
      await exchange(at, said, 'Noted.', new Date('2031-03-01T10:01:00Z'));
      await exchange(at, said, 'You said so.', new Date('2031-03-01T10:02:00Z'));
      await exchange(at, 'and?', 'Go on.', new Date('2031-03-01T10:03:00Z'));
      // The model of the last exchange restated the earlier messages, word for word.
      const [{ id: later }] = await database.rows<{ id: string }>(
        sql`SELECT id::text AS id FROM memories WHERE end_user_id = ${at.endUserId}
             AND content = 'and?'`,
      );
      for (const content of [`User said: ${secret}.`, `User said: ${said}.`, 'Likes tea.']) {
        await new Factory(database).engineFact(organizationId, at.endUserId, content, later);
      }
      await forget(organizationId, 'ren', secret);
      await forget(organizationId, 'ren', said);
      const left = await database.rows<{ content: string }>(
        sql`SELECT content FROM end_user_facts WHERE end_user_id = ${at.endUserId} ORDER BY content`,
      );
      // The second copy of the cat's message stays, so may the fact learned from it.
      expect(left.map((fact) => fact.content)).toEqual(['Likes tea.', `User said: ${said}.`]);
    });

    it('runs again when PostgreSQL ends a deadlock with a purge of the same message by rolling it back', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['rob']);
      const at = { organizationId, endUserId: endUserIds.rob, personalityId: personalityIds[0] };
      const secret = 'My locker code is 4417';
      await exchange(at, secret, 'Noted.', new Date('2031-03-01T10:00:00Z'));
      const [{ id: message }] = await database.rows<{ id: string }>(
        sql`SELECT id::text AS id FROM memories WHERE end_user_id = ${at.endUserId}
             AND content = ${secret}`,
      );
      await new Factory(database).engineFact(organizationId, at.endUserId, 'Has a locker', message);
      // A purge deleting the message as retention does: the fact learned from it first, held,
      // then the message once the forget holds it and waits for the fact (ON DELETE SET NULL
      // in the purge's case): a cycle PostgreSQL ends by rolling one of the two back.
      const purging = await HeldTransaction.begin();
      let forgot: Promise<void> | undefined;
      try {
        await purging.run(`SELECT 1 FROM end_user_facts WHERE memory_id = $1 FOR NO KEY UPDATE`, [
          message,
        ]);
        forgot = moduleRef.get(MemoriesService).forget(organizationId, 'rob', message);
        await purging.untilWaitedOn();
        await purging.run('DELETE FROM memories WHERE id = $1', [message]).catch(() => 0);
      } finally {
        await purging.end();
      }
      await forgot;
      expect(await conversationOf(at.endUserId)).toEqual([
        expect.objectContaining({ content: 'Noted.' }),
      ]);
    });

    it('leaves the reply to it without the record of its tool calls, and no other reply (review)', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['uma']);
      const at = { organizationId, endUserId: endUserIds.uma, personalityId: personalityIds[0] };
      const call = (orderId: string) => [
        { id: 'call_1', name: 'lookup_order', arguments: { order_id: orderId }, output: '{}' },
      ];
      await exchange(
        at,
        'where is order A-1?',
        'On its way.',
        new Date('2031-03-01T10:00:00Z'),
        call('A-1'),
      );
      await exchange(
        at,
        'and order B-2?',
        'Delivered.',
        new Date('2031-03-01T10:01:00Z'),
        call('B-2'),
      );
      await forget(organizationId, 'uma', 'where is order A-1?');
      const left = await conversationOf(at.endUserId);
      expect(left.map((m) => [m.content, m.tool_calls === null])).toEqual([
        ['On its way.', true],
        ['and order B-2?', true],
        ['Delivered.', false],
      ]);
      expect(JSON.stringify(left)).not.toContain('A-1');
    });
  });

  describe('facts', () => {
    it('keeps one fact per content, case and white space aside, up to MEMORY_FACTS_LIMIT', async () => {
      const { organizationId } = await tenant(['di']);
      const first = await facts.create(organizationId, 'di', 'Likes  green tea');
      const again = await facts.create(organizationId, 'di', 'likes GREEN tea ');
      expect(first.created).toBe(true);
      expect(again).toEqual({ created: false, fact: first.fact });
      await facts.create(organizationId, 'di', 'Lives in Lyon');
      await facts.create(organizationId, 'di', 'Plays chess');
      await expectAppError(
        facts.create(organizationId, 'di', 'Speaks Welsh'),
        'facts_limit_reached',
      );
    });

    it('of concurrent creates of one content, exactly one creates it', async () => {
      const { organizationId } = await tenant(['eve']);
      const results = await Promise.all(
        Array.from({ length: 6 }, () => facts.create(organizationId, 'eve', 'Collects stamps')),
      );
      expect(results.filter((result) => result.created)).toHaveLength(1);
      expect(new Set(results.map((result) => result.fact.id)).size).toBe(1);
    });

    it('waits for its end user’s erasure rather than deadlocking with it', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['kit']);
      const endUserId = endUserIds.kit;
      const [memory] = await new Factory(database).memories(
        organizationId,
        endUserId,
        personalityIds[0],
        ['I keep bees', 'Lovely'],
      );
      await new Factory(database).engineFact(organizationId, endUserId, 'Keeps bees', memory.id);
      // The erasure as ErasureWorker runs it: the end user's row claimed, then facts, then
      // the memories' postings and the memories themselves.
      const erasing = await HeldTransaction.begin();
      let deleted: Promise<boolean> | undefined;
      try {
        await erasing.run('SELECT 1 FROM end_users WHERE id = $1 FOR UPDATE', [endUserId]);
        await erasing.run('DELETE FROM end_user_facts WHERE end_user_id = $1', [endUserId]);
        deleted = moduleRef
          .get(MemoriesRepository)
          .deleteForEndUser(organizationId, 'kit', memory.id, () => []);
        await erasing.untilWaitedOn();
        // It waits at the end user's row, holding nothing the erasure needs.
        expect(
          await database.rows<{ relation: string }>(
            sql`SELECT relation::regclass::text AS relation FROM pg_locks
                 WHERE locktype = 'tuple'
                   AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
          ),
        ).toEqual([{ relation: 'end_users' }]);
        // Before, the deletion held the memory (and its postings) while it waited for the
        // facts: this statement waited for it in turn, and PostgreSQL aborted one of the two.
        await erasing.run('DELETE FROM memory_terms WHERE end_user_id = $1', [endUserId]);
        await erasing.run('DELETE FROM memories WHERE end_user_id = $1', [endUserId]);
        await erasing.run('DELETE FROM end_users WHERE id = $1', [endUserId]);
        await erasing.commit();
      } finally {
        await erasing.end();
      }
      // The erasure took the end user: nothing left to delete (a 404 over HTTP).
      expect(await deleted).toBe(false);
    });

    it('are purged by retention around an end user being erased, without deadlocking with it', async () => {
      const { organizationId, personalityIds, endUserIds } = await tenant(['lea', 'max']);
      await database.count(
        sql`UPDATE organizations SET memory_retention_days = 1 WHERE id = ${organizationId}`,
      );
      const memoriesOf = (endUserId: string) =>
        new Factory(database).memories(organizationId, endUserId, personalityIds[0], [
          'I keep bees',
          'Lovely',
        ]);
      const [memory] = await memoriesOf(endUserIds.lea);
      await memoriesOf(endUserIds.max);
      await new Factory(database).engineFact(
        organizationId,
        endUserIds.lea,
        'Keeps bees',
        memory.id,
      );
      const left = async (endUserId: string) =>
        (await database.rows(sql`SELECT 1 FROM memories WHERE end_user_id = ${endUserId}`)).length;
      const erasing = await HeldTransaction.begin();
      try {
        await erasing.run('SELECT 1 FROM end_users WHERE id = $1 FOR UPDATE', [endUserIds.lea]);
        await erasing.run('DELETE FROM end_user_facts WHERE end_user_id = $1', [endUserIds.lea]);
        // Their memories past retention are left to the erasure; another end user's go.
        // Before, the purge deleted them and waited for their facts (ON DELETE SET NULL) while
        // the erasure, deleting the memories next, waited for the purge: a deadlock.
        await moduleRef.get(MemoriesRepository).deletePastRetention(new Date('2040-01-01'), 100);
        expect(await left(endUserIds.max)).toBe(0);
        expect(await left(endUserIds.lea)).toBe(2);
        await erasing.run('DELETE FROM memory_terms WHERE end_user_id = $1', [endUserIds.lea]);
        await erasing.run('DELETE FROM memories WHERE end_user_id = $1', [endUserIds.lea]);
        await erasing.commit();
      } finally {
        await erasing.end();
      }
      expect(await left(endUserIds.lea)).toBe(0);
    });

    it('are purged by retention one organization after another: a backlog holds no other back', async () => {
      const [first, second] = [await tenant(['big']), await tenant(['small'])].sort((a, b) =>
        a.organizationId < b.organizationId ? -1 : 1,
      );
      // The organization met first holds the backlog; before, batches took from it until it was
      // drained, and the other's memories waited for all of it (found by review).
      for (const [t, count] of [
        [first, 30],
        [second, 3],
      ] as const) {
        await database.count(
          sql`UPDATE organizations SET memory_retention_days = 1 WHERE id = ${t.organizationId}`,
        );
        const [endUserId] = Object.values(t.endUserIds);
        await remember(
          t.organizationId,
          endUserId,
          t.personalityIds[0],
          Array.from({ length: count }, (_, i) => `memory ${i}`),
        );
      }
      const left = async (organizationId: string) =>
        (await database.rows(sql`SELECT 1 FROM memories WHERE organization_id = ${organizationId}`))
          .length;
      const repository = moduleRef.get(MemoriesRepository);
      let after: string | null = null;
      for (let batch = 0; batch < 20 && (await left(second.organizationId)) > 0; batch++) {
        const { endedIn } = await repository.deletePastRetention(new Date('2040-01-01'), 10, after);
        after = endedIn ?? after;
      }
      expect(await left(second.organizationId)).toBe(0);
      // The first batch took ten from the backlog; the second began with the other's three and
      // filled up from the backlog: 13 left of 30 (before, 0: the backlog went first whole).
      expect(await left(first.organizationId)).toBe(13);
    });

    describe('deleted while a keyed request about the end user runs', () => {
      const hash = Buffer.alloc(32, 5);
      const keyed = (organizationId: string, userId: string) => {
        const ref = {
          scopeType: 'organization' as const,
          scopeId: organizationId,
          key: `k-${userId}`,
        };
        const begin = async (requestId: string) =>
          moduleRef
            .get(IdempotencyService)
            .begin(ref, requestId, hash, [], { carriesData: true, hint: userId });
        const row = async () =>
          database.row<{ response_status: number | null; response_body: string | null }>(
            sql`SELECT response_status, response_body FROM idempotency_keys
                 WHERE scope_type = 'organization' AND scope_id = ${organizationId}
                   AND key = ${ref.key}`,
          );
        return { begin, row };
      };
      const claimed = (begun: BeginResult) => {
        if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
        return begun.claim;
      };

      it('the request keeps its key, and its answer, which may hold the fact, is not kept', async () => {
        const { organizationId } = await tenant(['gil']);
        const { begin, row } = keyed(organizationId, 'gil');
        const claim = claimed(await begin('creating'));
        const { fact } = await facts.create(organizationId, 'gil', 'Keeps bees');
        // Deleted between the creation's commit and its stored answer.
        await facts.delete(organizationId, 'gil', fact.id);
        // Still the request's: a retry meanwhile gets 409, its lease is renewed (a request
        // whose key was taken from it ran twice once its lease lapsed, found by review).
        await expectAppError(begin('retry-meanwhile'), 'idempotency_key_in_progress');
        expect(await moduleRef.get(IdempotencyRepository).renew(claim, 30_000, new Date())).toBe(
          true,
        );
        await moduleRef.get(IdempotencyService).settleAnswer(claim, 201, fact);
        // Before, the answer was kept, and replayed the deleted fact for 24 hours. Now the key
        // goes instead (an instance of any version then finds it free).
        expect(await row()).toBeUndefined();
        const retried = await begin('retry-after');
        expect(retried.kind).toBe('claimed');
        await moduleRef.get(IdempotencyService).giveUp(claimed(retried));
      });

      it('an answer stored as the deletion starts is waited for and deleted, not missed', async () => {
        const { organizationId, endUserIds } = await tenant(['ivo']);
        const { begin, row } = keyed(organizationId, 'ivo');
        const claim = claimed(await begin('creating'));
        const { fact } = await facts.create(organizationId, 'ivo', 'Keeps bees');
        const storing = await HeldTransaction.begin();
        try {
          // The request's answer, stored in a transaction that commits once the deletion runs.
          expect(
            await storing.run(
              `UPDATE idempotency_keys
                  SET response_status = 201, response_body = $3, completed_at = now(),
                      locked_by = NULL, locked_until = NULL
                WHERE scope_id = $1 AND key = $2 AND locked_by = 'creating'`,
              [organizationId, claim.key, JSON.stringify(fact)],
            ),
          ).toBe(1);
          // The deleting statement alone (the service runs its step again once it committed).
          const deleting = moduleRef
            .get(FactsRepository)
            .delete({ id: endUserIds.ivo, organizationId, userId: 'ivo' }, fact.id);
          // Before, the deletion did not wait: its snapshot held the key still running, so it
          // was neither an answer to delete nor a claim to mark, and the answer was kept.
          await storing.untilWaitedOn();
          await storing.commit();
          await deleting;
        } finally {
          await storing.end();
        }
        expect(await row()).toBeUndefined();
      });

      it('a claim made while the deletion waits for a lock is marked once it commits', async () => {
        const { organizationId } = await tenant(['jo']);
        const { fact } = await facts.create(organizationId, 'jo', 'Keeps bees');
        const { begin, row } = keyed(organizationId, 'jo');
        const patching = await HeldTransaction.begin();
        let claim: IdempotencyClaim;
        try {
          // A correction of the fact holds its row; the deletion waits for it, its snapshot
          // taken before the claim below.
          await patching.run('SELECT 1 FROM end_user_facts WHERE id = $1 FOR UPDATE', [fact.id]);
          const deleting = facts.delete(organizationId, 'jo', fact.id);
          await patching.untilWaitedOn();
          // A keyed request begins now and can still read the fact.
          claim = claimed(await begin('reading'));
          await patching.commit();
          await deleting;
        } finally {
          await patching.end();
        }
        await moduleRef.get(IdempotencyService).settleAnswer(claim, 200, { facts: [fact] });
        // Before, the step saw only the claims of its snapshot: the answer was kept.
        expect(await row()).toBeUndefined();
      });
    });

    it('answers 404 for another organization’s end user', async () => {
      const theirs = await tenant(['fay']);
      const mine = await tenant([]);
      await facts.create(theirs.organizationId, 'fay', 'Likes jazz');
      await expectAppError(facts.create(mine.organizationId, 'fay', 'Likes jazz'), 'not_found');
      await expectAppError(facts.list(mine.organizationId, 'fay', { limit: 10 }), 'not_found');
    });
  });
});
