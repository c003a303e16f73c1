import { MigrationInterface, QueryRunner } from 'typeorm';

/** Postings kept per (end user, lexeme), as in IndexMemoryTerms (a migration keeps its literal). */
const POSTINGS = 64;

/** The new memories' lexemes, one row per (end user, lexeme). */
const TOUCHED = `SELECT DISTINCT n.end_user_id, l.lexeme
                   FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)`;

const INSERT_POSTINGS = `INSERT INTO memory_terms (end_user_id, lexeme, memory_id)
         SELECT end_user_id, lexeme, id FROM (
           SELECT n.end_user_id, l.lexeme, n.id,
                  row_number() OVER (PARTITION BY n.end_user_id, l.lexeme ORDER BY n.id DESC) AS newest
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) p
          WHERE newest <= ${POSTINGS};`;

/**
 * The trim of IndexMemoryTerms locked with `FOR UPDATE SKIP LOCKED` under its `OFFSET`, and
 * PostgreSQL locks every row it reads there, the POSTINGS kept ones included: each reply wrote a
 * lock on 64 postings per lexeme of its two memories, about 430 WAL records and two thirds of the
 * reply's WAL (measured with pg_walinspect, docs/memory.md). Now the postings past the latest
 * POSTINGS are found without a lock, and only they are locked (still skipping rows another
 * transaction holds) and deleted, each by a TID scan.
 */
export class LockOnlyTrimmedMemoryTerms1795917900000 implements MigrationInterface {
  name = 'LockOnlyTrimmedMemoryTerms1795917900000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         ${INSERT_POSTINGS}
         DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held
            WHERE held.ctid = ANY (ARRAY(
                    SELECT past.ctid FROM (${TOUCHED}) k
                     CROSS JOIN LATERAL (
                           SELECT t.ctid FROM memory_terms t
                            WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                            ORDER BY t.memory_id DESC OFFSET ${POSTINGS}) past))
              FOR UPDATE SKIP LOCKED));
         RETURN NULL;
       END $$`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       BEGIN
         ${INSERT_POSTINGS}
         DELETE FROM memory_terms WHERE ctid IN (
           SELECT past.ctid
             FROM (${TOUCHED}) k
            CROSS JOIN LATERAL (
                  SELECT t.ctid FROM memory_terms t
                   WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                   ORDER BY t.memory_id DESC OFFSET ${POSTINGS}
                     FOR UPDATE SKIP LOCKED) past);
         RETURN NULL;
       END $$`,
    );
  }
}
