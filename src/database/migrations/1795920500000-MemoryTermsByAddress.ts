import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A reply's database time grew with the tables: over 20,000 replies of one end user, 32 at a
 * time, the memory_terms trim read from 1,900 to 7,700 blocks a statement (a diagnostic run)
 * and the rate fell from 143 to 68 a second (pg_stat_statements and auto_explain on this machine). The trim deletes
 * postings by row address (`ctid = ANY (…)`), and the plan its session had cached while the
 * table was small (sessions are pooled, a trigger's statements prepared) read the whole table
 * instead, twice, for every memory written, whether anything was to go or not. The function now
 * runs with `enable_seqscan = off`: the addresses are looked up (a TID scan), and its other
 * statements go by the primary key as they did.
 */
export class MemoryTermsByAddress1795920500000 implements MigrationInterface {
  name = 'MemoryTermsByAddress1795920500000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER FUNCTION "memories_index_terms"() SET enable_seqscan = off`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER FUNCTION "memories_index_terms"() RESET enable_seqscan`);
  }
}
