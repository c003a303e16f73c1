import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The knowledge_terms insert trigger trims by row address (`ctid = ANY (…)`), as the memory_terms
 * one does (MemoryTermsByAddress), and under a plan cached while the table was small such a trim
 * read the whole table, every organization's postings, on each upload and patch. It now runs
 * with `enable_seqscan = off`; its other statements read the transition table or go by
 * knowledge_terms' primary key. The delete trigger is left as it is: its check that an
 * organization still holds a chunk has only the GIN index to go by, which costs far more than the
 * sequential scan that stops at the first row.
 */
export class KnowledgeTermsByAddress1795920600000 implements MigrationInterface {
  name = 'KnowledgeTermsByAddress1795920600000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER FUNCTION "knowledge_chunks_index_terms"() SET enable_seqscan = off`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER FUNCTION "knowledge_chunks_index_terms"() RESET enable_seqscan`);
  }
}
