import type { TestingModule } from '@nestjs/testing';
import { DataSource, type EntityManager } from 'typeorm';
import { Database } from '../../src/database/database';
import { ChunkEmbeddingsCarryDocument1795920900000 } from '../../src/database/migrations/1795920900000-ChunkEmbeddingsCarryDocument';
import { sql } from '../../src/database/sql';
import { KnowledgeModule } from '../../src/knowledge/knowledge.module';
import { KnowledgeRepository } from '../../src/knowledge/knowledge.repository';
import { KnowledgeService } from '../../src/knowledge/knowledge.service';
import { KnowledgeWriteTurns } from '../../src/knowledge/knowledge-write-turns';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { revertAndRerun } from '../support/migration-rerun';

const MAX_BYTES = 2_048;

/**
 * The knowledge module alone on a real PostgreSQL, without HTTP ("medium" spec): KnowledgeService's
 * rules called directly, and its part in a reply (readReplyContext) as the reply calls it.
 */
describe('KnowledgeService (real database)', () => {
  let moduleRef: TestingModule;
  let knowledge: KnowledgeService;
  let database: Database;
  let factory: Factory;

  beforeAll(async () => {
    moduleRef = await moduleAlone([KnowledgeModule], { KNOWLEDGE_MAX_BYTES: String(MAX_BYTES) });
    knowledge = moduleRef.get(KnowledgeService);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  /** The titles a reply of the personality reads for the message. */
  async function titlesRead(organizationId: string, personalityId: string, message: string) {
    const { knowledge: chunks } = await knowledge.readReplyContext({
      organizationId,
      personalityId,
      userId: 'ada',
      message,
    });
    return [...new Set((chunks ?? []).map((chunk) => chunk.title))].sort();
  }

  describe('a reply reads', () => {
    it('the documents of its personality and those of every personality, never another’s', async () => {
      const organizationId = await factory.organization();
      const shop = await factory.personality(organizationId, 'Shop assistant');
      const guide = await factory.personality(organizationId, 'Tour guide');
      await knowledge.create(organizationId, {
        title: 'Returns',
        content: 'Parcels can be returned within thirty days.',
        personality_ids: [shop],
      });
      await knowledge.create(organizationId, {
        title: 'Tours',
        content: 'Walking tours leave at noon; parcels are not carried.',
        personality_ids: [guide],
      });
      await knowledge.create(organizationId, {
        title: 'Company',
        content: 'We ship parcels from Leeds.',
      });

      expect(await titlesRead(organizationId, shop, 'Where are parcels sent from?')).toEqual([
        'Company',
        'Returns',
      ]);
      expect(await titlesRead(organizationId, guide, 'Where are parcels sent from?')).toEqual([
        'Company',
        'Tours',
      ]);
    });

    it('a document detached from its personality no more, at once', async () => {
      const organizationId = await factory.organization();
      const shop = await factory.personality(organizationId);
      const other = await factory.personality(organizationId);
      const document = await knowledge.create(organizationId, {
        title: 'Opening hours',
        content: 'We open at nine on weekdays.',
        personality_ids: [shop],
      });
      expect(await titlesRead(organizationId, shop, 'When do you open?')).toEqual([
        'Opening hours',
      ]);
      // The drawers are cached per organization: the update must be seen by the next reply.
      await knowledge.update(organizationId, document.id, { personality_ids: [other] });
      expect(await titlesRead(organizationId, shop, 'When do you open?')).toEqual([]);
      expect(await titlesRead(organizationId, other, 'When do you open?')).toEqual([
        'Opening hours',
      ]);
    });

    it('nothing of another organization, even given its personality', async () => {
      const theirs = await factory.organization();
      const theirPersonality = await factory.personality(theirs);
      await knowledge.create(theirs, { title: 'Secret', content: 'The vault code is marmalade.' });
      const mine = await factory.organization();
      expect(await titlesRead(mine, theirPersonality, 'What is the vault code?')).toEqual([]);
      expect(await titlesRead(theirs, theirPersonality, 'What is the vault code?')).toEqual([
        'Secret',
      ]);
    });
  });

  describe('KNOWLEDGE_MAX_BYTES', () => {
    const bytes = (count: number) => `${'tea '.repeat(count / 4)}`.slice(0, count);

    it('refuses a document past the limit; a replaced content counts once', async () => {
      const organizationId = await factory.organization();
      const first = await knowledge.create(organizationId, {
        title: 'One',
        content: bytes(1_200),
      });
      await expectAppError(
        knowledge.create(organizationId, { title: 'Two', content: bytes(900) }),
        'knowledge_limit_reached',
      );
      // 1,200 replaced by 2,000: the old content is not counted beside the new.
      await knowledge.update(organizationId, first.id, { content: bytes(2_000) });
      await expectAppError(
        knowledge.update(organizationId, first.id, { content: bytes(MAX_BYTES + 4) }),
        'knowledge_limit_reached',
      );
    });

    it('of concurrent uploads, only as many as fit are stored', async () => {
      const organizationId = await factory.organization();
      const results = await Promise.allSettled(
        Array.from({ length: 4 }, (_, index) =>
          knowledge.create(organizationId, { title: `Doc ${index}`, content: bytes(700) }),
        ),
      );
      expect(results.filter((result) => result.status === 'fulfilled')).toHaveLength(2);
      const [held] = await database.rows<{ bytes: number; documents: number }>(
        sql`SELECT coalesce(sum(bytes), 0)::int AS bytes, count(*)::int AS documents
              FROM knowledge_documents WHERE organization_id = ${organizationId}`,
      );
      expect(held).toEqual({ bytes: 1_400, documents: 2 });
    });
  });

  it('chunk embeddings carry their document, written before migration ChunkEmbeddingsCarryDocument or after', async () => {
    const organizationId = await factory.organization();
    const documents: string[] = [];
    for (const title of ['Opening hours', 'Parking']) {
      documents.push((await knowledge.create(organizationId, { title, content: `${title}.` })).id);
    }
    /** An embedding of the document's chunk as the previous release's worker writes it: no document. */
    const embed = (documentId: string) =>
      database.rows(
        sql`INSERT INTO knowledge_chunk_embeddings (chunk_id, organization_id, model, embedding)
            SELECT k.id, ${organizationId}, 'previous-release', ARRAY[0.6, 0.8]::real[]
              FROM knowledge_chunks k WHERE k.document_id = ${documentId}`,
      );
    const migration = new ChunkEmbeddingsCarryDocument1795920900000();
    await revertAndRerun(moduleRef.get(DataSource), migration, () => embed(documents[0]));
    await embed(documents[1]);
    const carried = await database.rows<{ document_id: string }>(
      sql`SELECT document_id::text FROM knowledge_chunk_embeddings
           WHERE organization_id = ${organizationId} ORDER BY chunk_id`,
    );
    expect(carried).toEqual(documents.map((id) => ({ document_id: id })));
    const [{ included }] = await database.rows<{ included: string[] }>(
      sql`SELECT array_agg(a.attname::text ORDER BY k.n) AS included
            FROM pg_index i
           CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
           WHERE i.indexrelid = 'knowledge_chunk_embeddings_sketches_idx'::regclass
             AND k.n > i.indnkeyatts`,
    );
    expect(included).toEqual(['model', 'sketch', 'document_id']);
  });

  it('weighs a deletion and a PATCH of content by what they take away too (review)', async () => {
    // A large document's chunks and postings go in the write's statement: a large write, in
    // the instance's slot for large writes, whatever the new content weighs.
    const organizationId = await factory.organization();
    const content = 'Parcels can be returned within thirty days. '.repeat(40);
    const created = await knowledge.create(organizationId, { title: 'Returns', content });
    const turns = moduleRef.get(KnowledgeWriteTurns);
    const inTurn = turns.inTurn.bind(turns);
    const weights: number[] = [];
    const weighed = jest
      .spyOn(turns, 'inTurn')
      .mockImplementation(async (organization, write, bytes = 0) => {
        weights.push(typeof bytes === 'number' ? bytes : await bytes());
        return inTurn(organization, write, bytes);
      });
    try {
      await knowledge.update(organizationId, created.id, { content: 'Thirty days.' });
      await knowledge.update(organizationId, created.id, { title: 'Returns policy' });
      await knowledge.remove(organizationId, created.id);
      expect(weights).toEqual([created.bytes, 0, 12]);
    } finally {
      weighed.mockRestore();
    }
  });

  it('404 for a personality of another organization, and nothing stored', async () => {
    const organizationId = await factory.organization();
    const elsewhere = await factory.personality(await factory.organization());
    await expectAppError(
      knowledge.create(organizationId, {
        title: 'Misfiled',
        content: 'Attached to a stranger.',
        personality_ids: [elsewhere],
      }),
      'not_found',
    );
    const [row] = await database.rows<{ documents: number }>(
      sql`SELECT count(*)::int AS documents FROM knowledge_documents
           WHERE organization_id = ${organizationId}`,
    );
    expect(row.documents).toBe(0);
  });

  it('rewrites chunks only of the organization named, whatever document id it is given (review)', async () => {
    // The service reaches the rewrite only after its organization's own UPDATE of the document
    // found a row; the statements hold the organization too, so that no caller can skip that.
    const owner = await factory.organization();
    const stranger = await factory.organization();
    const document = await knowledge.create(owner, {
      title: 'Hours',
      content: 'We open at nine.\n\nWe close at five.',
    });
    const repository = moduleRef.get(KnowledgeRepository);
    const chunksOf = () =>
      database.rows<{ id: string; chunk_index: number; text: string }>(
        sql`SELECT id, chunk_index, text FROM knowledge_chunks
             WHERE document_id = ${document.id} ORDER BY chunk_index`,
      );
    const before = await chunksOf();
    expect(before.length).toBeGreaterThan(0);

    // Refused or not (its new chunks would take the owner's positions), the owner's stay.
    const chunks = ['We close at five.', 'A stranger wrote this.'];
    const attempt = (write: (manager: EntityManager) => Promise<unknown>) =>
      database.transaction(write).catch(() => undefined);
    await attempt((manager) => repository.newChunkBytes(manager, stranger, document.id, chunks));
    await attempt((manager) =>
      repository.replaceChunks(manager, stranger, document.id, 'simple', chunks),
    );

    expect(await chunksOf()).toEqual(before);
  });
});
