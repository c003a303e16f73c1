import { MigrationInterface, QueryRunner } from 'typeorm';

const FUNCTIONS = ['knowledge_chunks_index_terms', 'knowledge_chunks_unindex_terms'];

/**
 * The knowledge_terms triggers delete postings by row address (`ctid = ANY (…)`), as the
 * memory_terms one does, and under a plan cached while the table was small (sessions are pooled,
 * a trigger's statements prepared) such a delete read the whole table, every organization's
 * postings, for each upload, patch and deleted document (TrimMemoryTermsByCount found it in the
 * memories' trigger). They now run with `enable_seqscan = off`: the addresses are looked up, and
 * every other statement in them has an index to go by.
 */
export class KnowledgeTermsByAddress1795920600000 implements MigrationInterface {
  name = 'KnowledgeTermsByAddress1795920600000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    for (const name of FUNCTIONS) {
      await queryRunner.query(`ALTER FUNCTION "${name}"() SET enable_seqscan = off`);
    }
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const name of FUNCTIONS) {
      await queryRunner.query(`ALTER FUNCTION "${name}"() RESET enable_seqscan`);
    }
  }
}
