import { MigrationInterface, QueryRunner } from 'typeorm';

/** Postings kept per (end user, lexeme), as in IndexMemoryTerms (a migration keeps its literal). */
const POSTINGS = 64;

/** PostingsCarryPersonalityAndLength's insert, unchanged. */
const INSERT = `INSERT INTO memory_terms (end_user_id, lexeme, memory_id, personality_id, memory_length)
         SELECT end_user_id, lexeme, id, personality_id, memory_length FROM (
           SELECT n.end_user_id, l.lexeme, n.id, n.personality_id, length(n.search) AS memory_length,
                  row_number() OVER (PARTITION BY n.end_user_id, l.lexeme ORDER BY n.id DESC) AS newest
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) p
          WHERE newest <= ${POSTINGS};`;

/** LockOnlyTrimmedMemoryTerms' trim: every posting of the lexeme past the newest 64. */
const UNBOUNDED_TRIM = `DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held
            WHERE held.ctid = ANY (ARRAY(
                    SELECT past.ctid FROM (SELECT DISTINCT n.end_user_id, l.lexeme
                   FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) k
                     CROSS JOIN LATERAL (
                           SELECT t.ctid FROM memory_terms t
                            WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                            ORDER BY t.memory_id DESC OFFSET ${POSTINGS}) past))
              FOR UPDATE SKIP LOCKED));`;

/**
 * Each lexeme the statement wrote `added` postings of reads its newest 64 + added and no further:
 * the `added` past the 64 are deleted, those no other transaction holds, locking only those. A
 * posting another transaction holds is left (a trim of the same word at once, a memory being
 * forgotten): nothing inside the 64 is ever taken instead, so a few may stay past them, never
 * read (every read takes a word's newest), deleted with their memories.
 */
const BOUNDED_TRIM = `DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held
            WHERE held.ctid = ANY (ARRAY(
                    SELECT past.ctid FROM (
                           SELECT n.end_user_id, l.lexeme, least(count(*), ${POSTINGS})::int AS added
                             FROM new_memories n
                            CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
                            GROUP BY n.end_user_id, l.lexeme) k
                     CROSS JOIN LATERAL (
                           SELECT t.ctid FROM memory_terms t
                            WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                            ORDER BY t.memory_id DESC OFFSET ${POSTINGS} LIMIT k.added) past))
              FOR UPDATE SKIP LOCKED));`;

/** The trigger function with the given trim and settings (MemoryTermsByAddress's kept). */
const indexTerms = (trim: string, settings: string) =>
  `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql
     SET enable_seqscan = off ${settings} AS $$
   BEGIN
     ${INSERT}
     ${trim}
     RETURN NULL;
   END $$`;

/**
 * The trim reads a lexeme's window, not every posting the lexeme ever had. It used to read past
 * the newest 64 to the end (OFFSET 64, no limit), by a bitmap scan that visits every entry's row:
 * and the postings it had deleted before stay in the index until VACUUM passes. One end user's
 * 20,000 replies of the same sentence, 32 at a time, slowed as their history grew (autovacuum
 * off on this machine): the trigger took 111 ms a statement at 19,500 memories (6,620 entries
 * read per lexeme). A trim deletes what lies past the 64, so the postings let go of before are a
 * lexeme's oldest (but for memories forgotten in between), and a scan from the newest that stops
 * at 64 + added does not reach them; bitmap scans are turned off for the function, as they
 * cannot stop early.
 */
export class TrimPostingsWithinTheWindow1795921000000 implements MigrationInterface {
  name = 'TrimPostingsWithinTheWindow1795921000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(indexTerms(BOUNDED_TRIM, 'SET enable_bitmapscan = off'));
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(indexTerms(UNBOUNDED_TRIM, ''));
  }
}
