import type { TestingModule } from '@nestjs/testing';
import { DataSource } from 'typeorm';
import { Database } from '../../src/database/database';
import { AddPgvectorColumns1795920700000 } from '../../src/database/migrations/1795920700000-AddPgvectorColumns';
import { sql } from '../../src/database/sql';
import { Embedder, unitLength } from '../../src/embeddings/embedder';
import type { Meaning } from '../../src/embeddings/fusion';
import { rankedChunks } from '../../src/knowledge/knowledge.repository';
import { KnowledgeModule } from '../../src/knowledge/knowledge.module';
import { KnowledgeService } from '../../src/knowledge/knowledge.service';
import { memoryRanking } from '../../src/memory/memory-search';
import { MemoryModule } from '../../src/memory/memory.module';
import { pgvectorStatements } from '../../src/queries/statements';
import { KNOWLEDGE_DOCUMENTS_EN, KNOWLEDGE_QUESTIONS_EN } from '../fixtures/recall/knowledge-en';
import { MEMORY_RECALL_EN } from '../fixtures/recall/memory-en';
import { Factory } from '../support/factory';
import { FAKE_MIN_SIMILARITY, FakeEmbeddings, fakeEmbedding } from '../support/fake-embeddings';
import { moduleAlone } from '../support/module-alone';
import { startPgvectorDatabase, type PgvectorDatabase } from '../support/pgvector-database';

const MODEL = 'fake-embedder';
/** The Embedder shares a question's call within an organization only: any id keys it. */
const ANY_ORGANIZATION = '00000000-0000-4000-8000-000000000000';

/** Filler an end user says between the statements: words of their own, none of the questions'. */
const FILLER = [
  'The weather turned grey again this afternoon.',
  'I watched a documentary about volcanoes last night.',
  'My neighbour repainted his fence bright yellow.',
  'The train was twenty minutes late this morning.',
];

/**
 * Recall by meaning where the database has pgvector (migration AddPgvectorColumns, docs/memory.md
 * "pgvector"), on PGlite: the migrations run there as they run anywhere, the extension's column
 * is filled by its trigger, the Embedder chooses it, and the rankings it gives are the `real[]`
 * path's, on the labelled sets. PGlite is one session for every connection, so this runs the
 * modules' statements, not the service's concurrency (the rest of the suite does that).
 */
describe('Recall by meaning with pgvector (PGlite)', () => {
  let pgvector: PgvectorDatabase;
  let embeddings: FakeEmbeddings;
  let moduleRef: TestingModule;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    pgvector = await startPgvectorDatabase();
    embeddings = new FakeEmbeddings();
    await embeddings.start();
    moduleRef = await moduleAlone([MemoryModule, KnowledgeModule], {
      DATABASE_URL: pgvector.url,
      EMBEDDINGS_MODEL: MODEL,
      EMBEDDINGS_BASE_URL: embeddings.url,
      EMBEDDINGS_API_KEY: 'test',
      EMBEDDINGS_MIN_SIMILARITY: String(FAKE_MIN_SIMILARITY),
    });
    database = moduleRef.get(Database);
    factory = new Factory(database);
  }, 180_000);
  afterAll(async () => {
    await moduleRef?.close();
    await embeddings?.stop();
    await pgvector?.stop();
  });

  /** The question's Meaning as the Embedder gives it, whole vectors compared either way. */
  async function meaningsOf(text: string): Promise<Record<'pgvector' | 'array', Meaning>> {
    const meaning = await moduleRef.get(Embedder).embedQuery(ANY_ORGANIZATION, text);
    if (!meaning) throw new Error('the question was not embedded');
    return {
      pgvector: { ...meaning, wholeVectors: 'pgvector' },
      array: { ...meaning, wholeVectors: 'array' },
    };
  }

  it('adds the vector column, filled for the embeddings before it and by its trigger after', async () => {
    const organizationId = await factory.organization();
    const personalityId = await factory.personality(organizationId);
    const endUserId = await factory.endUser(organizationId, 'ada');
    // The migration reverted (its down()), an embedding written, the migration run again.
    const migration = new AddPgvectorColumns1795920700000();
    const runner = moduleRef.get(DataSource).createQueryRunner();
    try {
      await migration.down(runner);
      expect(await vectorColumns()).toBe(0);
      const [before] = await factory.memories(organizationId, endUserId, personalityId, [
        'I love kayaks.',
      ]);
      await embed(endUserId, personalityId, [before]);
      await migration.up(runner);
    } finally {
      await runner.release();
    }
    expect(await vectorColumns()).toBe(2);

    const [, after] = await factory.memories(organizationId, endUserId, personalityId, [
      'Canoes too.',
    ]);
    await embed(endUserId, personalityId, [after]);
    const rows = await database.rows<{ dims: number; cosine: number }>(
      sql`SELECT vector_dims(vector) AS dims, (vector <#> embedding::vector) * -1 AS cosine
            FROM memory_embeddings WHERE end_user_id = ${endUserId} ORDER BY memory_id`,
    );
    expect(rows).toHaveLength(2);
    for (const row of rows) {
      expect(row.dims).toBe(256);
      expect(row.cosine).toBeCloseTo(1, 5);
    }
  });

  it('accepts the checked-in pgvector statements (src/queries)', async () => {
    const client = await database.pool.connect();
    try {
      for (const [title, text] of pgvectorStatements()) {
        await client.query(`PREPARE snapshot AS ${text}`).catch((error: Error) => {
          throw new Error(`${title}: ${error.message}`);
        });
        await client.query('DEALLOCATE snapshot');
      }
    } finally {
      client.release();
    }
  });

  it('is what the Embedder compares whole vectors with', async () => {
    const meaning = await moduleRef
      .get(Embedder)
      .embedQuery(ANY_ORGANIZATION, 'Where did I go on holiday?');
    expect(meaning?.wholeVectors).toBe('pgvector');
  });

  it('ranks an end user’s memories by meaning as the real[] path does, finding paraphrases, backfilled or not', async () => {
    const organizationId = await factory.organization();
    const personalityId = await factory.personality(organizationId);
    const endUserId = await factory.endUser(organizationId, 'grace');
    const said: string[] = [];
    MEMORY_RECALL_EN.forEach(({ statement }, index) => {
      said.push(statement, FILLER[index % FILLER.length]);
    });
    const memories = await factory.memories(organizationId, endUserId, personalityId, said);
    await embed(endUserId, personalityId, memories);
    const idOf = new Map(memories.map((memory) => [memory.content, memory.id]));
    // The statements' rows as the backfill has not reached them yet: no `vector`, only `embedding`.
    await database.count(
      sql`ALTER TABLE memory_embeddings DISABLE TRIGGER memory_embeddings_set_vector`,
    );
    try {
      const statements = MEMORY_RECALL_EN.map(({ statement }) => idOf.get(statement)!);
      expect(
        await database.count(
          sql`UPDATE memory_embeddings SET vector = NULL WHERE memory_id = ANY (${statements}::bigint[])`,
        ),
      ).toBe(MEMORY_RECALL_EN.length);
    } finally {
      await database.count(
        sql`ALTER TABLE memory_embeddings ENABLE TRIGGER memory_embeddings_set_vector`,
      );
    }

    let found = 0;
    for (const { statement, paraphrase } of MEMORY_RECALL_EN) {
      const meanings = await meaningsOf(paraphrase);
      const ranked = async (meaning: Meaning) => {
        const ranking = memoryRanking(
          {
            organizationId,
            endUserId: sql`${endUserId}::uuid`,
            personalityId,
            text: paraphrase,
            limit: 8,
          },
          meaning,
        );
        const rows = await database.rows<{ id: string }>(
          sql`SELECT r.id FROM (${ranking.rows}) r ORDER BY ${ranking.order}`,
        );
        return rows.map((row) => row.id);
      };
      const byPgvector = await ranked(meanings.pgvector);
      expect(byPgvector).toEqual(await ranked(meanings.array));
      if (byPgvector.includes(idOf.get(statement)!)) found += 1;
    }
    // A paraphrase shares no word with its statement: only the ranking by meaning finds it.
    expect(found).toBeGreaterThanOrEqual(24);
  });

  it('ranks knowledge by meaning as the real[] path does, for a reply and a search', async () => {
    const organizationId = await factory.organization();
    const personalityId = await factory.personality(organizationId);
    const knowledge = moduleRef.get(KnowledgeService);
    for (const document of KNOWLEDGE_DOCUMENTS_EN) {
      await knowledge.create(organizationId, { title: document.title, content: document.content });
    }
    const chunks = await database.count(
      sql`INSERT INTO knowledge_chunk_embeddings (chunk_id, organization_id, model, embedding)
          SELECT k.id, k.organization_id, ${MODEL}, e.embedding::real[]
            FROM knowledge_chunks k
            JOIN (SELECT * FROM json_to_recordset(${JSON.stringify(
              await chunkEmbeddings(organizationId),
            )}::json) AS e(id bigint, embedding float8[])) e ON e.id = k.id`,
    );
    expect(chunks).toBeGreaterThanOrEqual(KNOWLEDGE_DOCUMENTS_EN.length);

    let answered = 0;
    for (const { question, passage } of KNOWLEDGE_QUESTIONS_EN) {
      const meanings = await meaningsOf(question);
      const ranked = async (personality: string | null, meaning: Meaning) =>
        (await database.rows(rankedChunks(organizationId, personality, question, 4, meaning))).map(
          (hit) => hit.text,
        );
      const forReply = await ranked(personalityId, meanings.pgvector);
      expect(forReply).toEqual(await ranked(personalityId, meanings.array));
      expect(await ranked(null, meanings.pgvector)).toEqual(await ranked(null, meanings.array));
      if (forReply.some((content) => content.includes(passage))) answered += 1;
    }
    expect(answered / KNOWLEDGE_QUESTIONS_EN.length).toBeGreaterThanOrEqual(0.9);
  });

  /** The embeddings tables holding a `vector` column. */
  async function vectorColumns(): Promise<number> {
    const [row] = await database.rows<{ count: number }>(
      sql`SELECT count(*)::int AS count FROM pg_attribute
           WHERE attrelid IN ('memory_embeddings'::regclass, 'knowledge_chunk_embeddings'::regclass)
             AND attname = 'vector' AND NOT attisdropped`,
    );
    return row.count;
  }

  /** The memories' embeddings, as the worker stores them (the triggers add sketch and vector). */
  async function embed(
    endUserId: string,
    personalityId: string,
    memories: Array<{ id: string; content: string }>,
  ): Promise<void> {
    const rows = memories.map((memory) => ({
      id: memory.id,
      embedding: unitLength(fakeEmbedding(memory.content)),
    }));
    await database.count(
      sql`INSERT INTO memory_embeddings (memory_id, end_user_id, personality_id, model, embedding)
          SELECT e.id, ${endUserId}, ${personalityId}, ${MODEL}, e.embedding::real[]
            FROM json_to_recordset(${JSON.stringify(rows)}::json) AS e(id bigint, embedding float8[])`,
    );
  }

  /** Each chunk of the organization with its fake embedding. */
  async function chunkEmbeddings(organizationId: string) {
    const chunks = await database.rows<{ id: string; content: string }>(
      sql`SELECT id::text AS id, text AS content FROM knowledge_chunks WHERE organization_id = ${organizationId}`,
    );
    return chunks.map((chunk) => ({
      id: chunk.id,
      embedding: unitLength(fakeEmbedding(chunk.content)),
    }));
  }
});
