import { MigrationInterface, QueryRunner } from 'typeorm';

/** Postings kept per (end user, lexeme), as in IndexMemoryTerms (a migration keeps its literal). */
const POSTINGS = 64;

/**
 * Positions inside the window a trim also reads, and may delete from when trims of the same word
 * run at once (below): up to this many concurrent trims of one (end user, lexeme) keep it at 64.
 */
const SLACK = 32;

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
 * Each lexeme the statement wrote `added` postings of reads its newest 64 + added, no further:
 * positions 33 to 64 + added (`window`). What lies past 64 is `over`; the oldest `over` of the
 * window's rows that no other transaction holds are deleted, locking only those. A trim of the
 * same lexeme at once holds the oldest, so this one takes the next: the two together leave 64.
 * The window's rows are looked up by address and taken oldest first by their place in it: ordered
 * by memory_id, the lookup became a walk of memory_terms_memory_idx from its first entry.
 */
const BOUNDED_TRIM = `WITH touched AS MATERIALIZED (
           SELECT n.end_user_id, l.lexeme, least(count(*), ${POSTINGS})::int AS added
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
            GROUP BY n.end_user_id, l.lexeme),
         windows AS MATERIALIZED (
           SELECT w.ctids, cardinality(w.ctids) - ${SLACK} AS over
             FROM touched k CROSS JOIN LATERAL (
                    SELECT array_agg(t.ctid ORDER BY t.memory_id) AS ctids FROM (
                      SELECT t.ctid, t.memory_id FROM memory_terms t
                       WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                       ORDER BY t.memory_id DESC
                      OFFSET ${POSTINGS - SLACK} LIMIT k.added + ${SLACK}) t) w)
     DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT past.ctid FROM windows w CROSS JOIN LATERAL (
                    SELECT held.ctid FROM memory_terms held
                     WHERE held.ctid = ANY (w.ctids)
                     ORDER BY array_position(w.ctids, held.ctid)
                     LIMIT greatest(w.over, 0)
                       FOR UPDATE SKIP LOCKED) past
            WHERE w.over > 0));`;

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
 * 20,000 replies of the same sentence, 32 at a time, slowed from 260 to 67 a second on this
 * machine (autovacuum off), the trigger taking 111 ms a statement at 19,500 memories (6,620
 * entries read per lexeme). Deleted postings are always a lexeme's oldest, so a scan from the
 * newest that stops at 64 + added never reaches them; bitmap scans are turned off for the
 * function, as they cannot stop early.
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
