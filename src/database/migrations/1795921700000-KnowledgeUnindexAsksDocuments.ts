import { MigrationInterface, QueryRunner } from 'typeorm';

/** The delete trigger's question "is the organization left with no chunk?", as it landed. */
const ASKS_CHUNKS =
  'IF NOT EXISTS (SELECT FROM knowledge_chunks c WHERE c.organization_id = organization) THEN';

/**
 * The same question asked of the organization's documents: a chunk has a document, and a
 * deletion's cascade has removed the document before its chunks' trigger runs.
 */
const ASKS_DOCUMENTS =
  'IF NOT EXISTS (SELECT FROM knowledge_documents d WHERE d.organization_id = organization) THEN';

/**
 * knowledge_chunks_unindex_terms (migration IndexKnowledgeTerms) asked, on every deletion of
 * chunks, whether the organization still held one. knowledge_chunks has no index led by
 * organization_id (only the GIN index, which answers an EXISTS by a bitmap of every chunk the
 * organization holds, so the planner reads the table instead): for an organization left with
 * none, the whole table of every tenant was read, under the organization's lock, on each
 * DELETE of its last document and each content PATCH of its only one. knowledge_documents is
 * led by organization_id (knowledge_documents_list_idx). The function's text is otherwise kept:
 * it is read back and the one line replaced, so this migration cannot drift from it.
 */
export class KnowledgeUnindexAsksDocuments1795921700000 implements MigrationInterface {
  name = 'KnowledgeUnindexAsksDocuments1795921700000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await replaceLine(queryRunner, ASKS_CHUNKS, ASKS_DOCUMENTS);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await replaceLine(queryRunner, ASKS_DOCUMENTS, ASKS_CHUNKS);
  }
}

async function replaceLine(queryRunner: QueryRunner, from: string, to: string): Promise<void> {
  const [{ definition }] = (await queryRunner.query(
    `SELECT pg_get_functiondef('knowledge_chunks_unindex_terms()'::regprocedure) AS definition`,
  )) as Array<{ definition: string }>;
  if (!definition.includes(from)) {
    throw new Error(`knowledge_chunks_unindex_terms does not hold the line to replace: ${from}`);
  }
  await queryRunner.query(definition.replace(from, to));
}
