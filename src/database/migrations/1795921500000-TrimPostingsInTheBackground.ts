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

/** Each lexeme's postings past its newest 64, `added` of them at most (TrimPostingsWithinTheWindow). */
const PAST_THE_WINDOW = `SELECT p.ctid FROM (
                  SELECT n.end_user_id, l.lexeme, least(count(*), ${POSTINGS})::int AS added
                    FROM new_memories n
                   CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
                   GROUP BY n.end_user_id, l.lexeme) k
            CROSS JOIN LATERAL (
                  SELECT t.ctid FROM memory_terms t
                   WHERE t.end_user_id = k.end_user_id AND t.lexeme = k.lexeme
                   ORDER BY t.memory_id DESC OFFSET ${POSTINGS} LIMIT k.added) p`;

/** TrimPostingsWithinTheWindow's trigger function, which down() puts back. */
const WITHIN_THE_WINDOW = `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql
     SET enable_seqscan = off SET enable_bitmapscan = off AS $$
   BEGIN
     ${INSERT}
     DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
           SELECT held.ctid FROM memory_terms held WHERE held.ctid = ANY (ARRAY(${PAST_THE_WINDOW}))
              FOR UPDATE SKIP LOCKED));
     RETURN NULL;
   END $$`;

/**
 * Postings past a word's 64 that the trigger could not trim are trimmed in the background. When
 * one end user's replies are written at once, each statement sees the postings committed before
 * it and its own: all of them pick the same postings past the 64, one takes them and the others
 * skip them (SKIP LOCKED), so that end user's words kept most of their postings (4,311 of 6,000
 * at most in bench postings-layout, 16 at once). Reading further in the trigger is no cure: past
 * the live postings lie those deleted before, which the index holds until VACUUM
 * (TrimPostingsWithinTheWindow).
 *
 * The trigger now counts what it trimmed: when it is less than it picked, it writes the words of
 * its memories to memory_terms_to_trim (not twice while a row is waiting: no unique key, so that
 * no reply waits on another's insert). memory_terms_trim_words(batch), run by every instance's
 * PostingsTrimWorker, takes up to `batch` of those rows (SKIP LOCKED) and deletes every posting
 * of their words past the newest 64 that no one else holds. A reply that trims what it picked
 * costs what it did: the same reads, a count, a comparison.
 *
 * Online: a new table, and functions replaced.
 */
export class TrimPostingsInTheBackground1795921500000 implements MigrationInterface {
  name = 'TrimPostingsInTheBackground1795921500000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE IF NOT EXISTS "memory_terms_to_trim" (
         "id" bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
         "end_user_id" uuid NOT NULL,
         "lexeme" text COLLATE "C" NOT NULL,
         CONSTRAINT "memory_terms_to_trim_pkey" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX IF NOT EXISTS "memory_terms_to_trim_word_idx"
         ON "memory_terms_to_trim" ("end_user_id", "lexeme")`,
    );
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memories_index_terms"() RETURNS trigger LANGUAGE plpgsql
         SET enable_seqscan = off SET enable_bitmapscan = off AS $$
       DECLARE
         past tid[];
         trimmed integer;
       BEGIN
         ${INSERT}
         past := ARRAY(${PAST_THE_WINDOW});
         DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
               SELECT held.ctid FROM memory_terms held WHERE held.ctid = ANY (past)
                  FOR UPDATE SKIP LOCKED));
         GET DIAGNOSTICS trimmed = ROW_COUNT;
         -- Another statement trimmed or holds some of them: its own postings past the 64 stay.
         IF trimmed < cardinality(past) THEN
           INSERT INTO memory_terms_to_trim (end_user_id, lexeme)
           SELECT DISTINCT n.end_user_id, l.lexeme
             FROM new_memories n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
            WHERE NOT EXISTS (SELECT FROM memory_terms_to_trim w
                               WHERE w.end_user_id = n.end_user_id AND w.lexeme = l.lexeme);
         END IF;
         RETURN NULL;
       END $$`,
    );
    // Reads a word's postings to their end (those deleted before and not yet vacuumed too): a
    // background job's cost, at each look at a word written down, not a reply's. A word that had postings
    // past the 64 is written down again, to be looked at once more: a reply open meanwhile may
    // hold some of them (skipped here), or hold the posting it trims while this takes the rest,
    // and its own posting then stays past the 64 with no row left for it. A word is let go only
    // when a look finds nothing past its 64. Answers the rows let go (taken, less those written
    // again): the worker takes batches until one lets fewer go than it asked for, so words whose
    // postings a long transaction holds are looked at once a pass, not in a loop.
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "memory_terms_trim_words"(batch integer) RETURNS integer
         LANGUAGE plpgsql SET enable_seqscan = off SET enable_bitmapscan = off AS $$
       DECLARE
         let_go integer;
       BEGIN
         -- Nothing waiting: no statement on memory_terms, so no lock on it.
         IF NOT EXISTS (SELECT FROM memory_terms_to_trim) THEN
           RETURN 0;
         END IF;
         WITH claimed AS (
                DELETE FROM memory_terms_to_trim WHERE id = ANY (ARRAY(
                       SELECT id FROM memory_terms_to_trim ORDER BY id LIMIT batch
                          FOR UPDATE SKIP LOCKED))
                RETURNING end_user_id, lexeme),
              past AS MATERIALIZED (
                SELECT w.end_user_id, w.lexeme, p.ctid
                  FROM (SELECT DISTINCT end_user_id, lexeme FROM claimed) w
                 CROSS JOIN LATERAL (
                       SELECT t.ctid FROM memory_terms t
                        WHERE t.end_user_id = w.end_user_id AND t.lexeme = w.lexeme
                        ORDER BY t.memory_id DESC OFFSET ${POSTINGS}) p),
              trimmed AS (
                DELETE FROM memory_terms WHERE ctid = ANY (ARRAY(
                       SELECT held.ctid FROM memory_terms held
                        WHERE held.ctid = ANY (ARRAY(SELECT ctid FROM past))
                          FOR UPDATE SKIP LOCKED))),
              again AS (
                INSERT INTO memory_terms_to_trim (end_user_id, lexeme)
                SELECT DISTINCT end_user_id, lexeme FROM past
                RETURNING 1)
         SELECT (SELECT count(*) FROM claimed) - (SELECT count(*) FROM again) INTO let_go;
         RETURN let_go;
       END $$`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(WITHIN_THE_WINDOW);
    await queryRunner.query(`DROP FUNCTION IF EXISTS "memory_terms_trim_words"(integer)`);
    await queryRunner.query(`DROP TABLE IF EXISTS "memory_terms_to_trim"`);
  }
}
