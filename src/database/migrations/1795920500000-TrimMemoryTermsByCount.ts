import { MigrationInterface, QueryRunner } from 'typeorm';

/** Postings kept per (end user, lexeme), as in IndexMemoryTerms (a migration keeps its literal). */
const POSTINGS = 64;

const INSERT_POSTINGS = `INSERT INTO memory_terms (end_user_id, lexeme, memory_id)
         SELECT end_user_id, lexeme, id FROM (
           SELECT n.end_user_id, l.lexeme, n.id,
                  row_number() OVER (PARTITION BY n.end_user_id, l.lexeme ORDER BY n.id DESC) AS newest
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)) p
          WHERE newest <= ${POSTINGS};`;

/** The trigger function of LockOnlyTrimmedMemoryTerms, with what changes between up and down. */
function indexTerms(settings: string, before: string, touched: string, past: string): string {
  return `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql ${settings} AS $$
       BEGIN
         ${INSERT_POSTINGS}
         ${before}
         DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held
            WHERE held.ctid = ANY (ARRAY(
                    SELECT past.ctid FROM (${touched}) k
                     CROSS JOIN LATERAL (${past}) past))
              FOR UPDATE SKIP LOCKED));
         RETURN NULL;
       END $$`;
}

/**
 * A reply's database time grew with its end user's history: over 20,000 replies of one end
 * user, 32 at a time, the trim's blocks read went from 900 to 6,000 a statement and the rate fell
 * from 143 to 68 a second (pg_stat_statements and auto_explain, this machine, autovacuum off).
 * Two causes, both here:
 *
 * - **The table read whole.** The trim finds its rows by address (`ctid = ANY (…)`); a plan cached
 *   while memory_terms was small (the sessions are pooled, the trigger's statements prepared)
 *   read the whole table instead, deleted rows included. The function now runs with
 *   `enable_seqscan = off`, so the addresses are always looked up (a TID scan).
 * - **The deleted tail.** The trim read every posting of a touched lexeme past the latest
 *   POSTINGS, and those it had deleted stay in the index until a vacuum (in production a large
 *   table's comes late). Now the trims of one end user take turns (a transaction advisory lock
 *   per end user, in order, after the new postings are in), so each reads what the one before
 *   committed: POSTINGS postings of a lexeme besides its own. It lets go of as many as it added,
 *   those right past the latest POSTINGS, and its scan stops there.
 *
 * The lock is held from the trim to the commit, right after: a reply's other locks (the fact
 * lock) are taken before its statement, so none is waited for while this one is held, and an
 * import writes an end user nobody else can see yet. Rows another transaction holds (a cascade
 * deleting them) are still skipped. Measured again: 1,200 blocks a trim, flat, 200 replies a
 * second over the 20,000 (docs/memory.md, "What recall costs").
 */
export class TrimMemoryTermsByCount1795920500000 implements MigrationInterface {
  name = 'TrimMemoryTermsByCount1795920500000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      indexTerms(
        'SET enable_seqscan = off',
        `PERFORM pg_advisory_xact_lock(hashtextextended('memory-terms:' || u.end_user_id, 0))
            FROM (SELECT DISTINCT end_user_id FROM new_memories ORDER BY 1) u;`,
        `SELECT n.end_user_id, l.lexeme, least(count(*), ${POSTINGS}) AS added
           FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
          GROUP BY n.end_user_id, l.lexeme`,
        `SELECT t.ctid FROM memory_terms t
          WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
          ORDER BY t.memory_id DESC OFFSET ${POSTINGS} LIMIT k.added`,
      ),
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      indexTerms(
        '',
        '',
        `SELECT DISTINCT n.end_user_id, l.lexeme
           FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)`,
        `SELECT t.ctid FROM memory_terms t
          WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
          ORDER BY t.memory_id DESC OFFSET ${POSTINGS}`,
      ),
    );
  }
}
