import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Postings kept per (organization, lexeme): its best-weighted chunks. A literal here, not
 * knowledge.repository.ts's constant: a migration stays what it was when it landed.
 */
const POSTINGS = 128;

/**
 * A chunk's lexemes with their weights: rows (organization_id, lexeme, weight, id, document_id).
 * The lexeme compared byte by byte, as the column: sorting them by a language's collation (the
 * postgres image's default is en_US) costs several times as much and orders nothing people read.
 */
function weighted(chunks: string): string {
  return `SELECT n.organization_id, l.lexeme COLLATE "C" AS lexeme,
                 knowledge_term_weight(coalesce(array_length(l.positions, 1), 1), length(n.search)) AS weight,
                 n.id, n.document_id
            FROM ${chunks} n CROSS JOIN LATERAL unnest(n.search) AS l`;
}

/**
 * The organization advisory lock a document's writes take (KnowledgeRepository.lockOrganization),
 * taken again by each trigger for the organizations of `chunks`, in order: a write that does not
 * take it itself (a DELETE of a document, an erasure's cascade) still waits for the others, and
 * then reads what they committed.
 */
function lockOrganizations(chunks: string): string {
  return `PERFORM pg_advisory_xact_lock(hashtextextended('knowledge:' || o.organization_id, 0))
             FROM (SELECT DISTINCT organization_id FROM ${chunks} ORDER BY 1) o`;
}

/** The best POSTINGS of each (organization, lexeme) of `chunks`, inserted. */
function insertBest(chunks: string): string {
  return `INSERT INTO knowledge_terms (organization_id, lexeme, weight, chunk_id, document_id)
          SELECT organization_id, lexeme, weight, id, document_id FROM (
            SELECT w.*, row_number() OVER (PARTITION BY w.organization_id, w.lexeme
                                               ORDER BY w.weight DESC, w.id DESC) AS best
              FROM (${weighted(chunks)}) w) p
           WHERE best <= ${POSTINGS}`;
}

/**
 * Knowledge retrieval read every chunk of the organization holding one of the message's words
 * through knowledge_chunks_search_idx, then ranked up to 1,000: 13.5 ms p50 for common words at
 * 10,000 chunks, against issue 31's 2 ms per reply. As memory_terms does for memories, this
 * table lists each chunk's lexemes under its organization, and keeps of each lexeme only its
 * POSTINGS best chunks by BM25 term weight (how often the chunk says it, for its length), so a
 * search reads at most POSTINGS rows per word, by one index range scan, whatever the
 * organization holds and whatever the statistics say (docs/knowledge.md#search).
 *
 * Writes go through two statement-level triggers. On insert (an upload, a patch) the new chunks'
 * best postings are added and each touched lexeme is cut back to its POSTINGS best. On delete
 * (a patch, a deleted document, an erased organization; a cascade fires it too) the deleted
 * chunks' postings are deleted, each by its primary key, and each lexeme of theirs that may now
 * list fewer holders than it has is queued for KnowledgeTermRefillWorker, which lists the next
 * best from the chunks that still hold it (the GIN index): a document deleted does not leave a
 * common word unfindable in the others for more than seconds. There is no foreign
 * key to the chunk: its check, one per posting, was 0.3 s of a 1 MiB upload's 31,000 postings,
 * and the delete trigger does what its cascade would. Both triggers take the organization's
 * advisory lock (KnowledgeRepository.lockOrganization): no two of one organization run at once.
 */
export class IndexKnowledgeTerms1795920100000 implements MigrationInterface {
  name = 'IndexKnowledgeTerms1795920100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // BM25's term weight with its usual constants (k1 1.2, b 0.75), a chunk's length counted in
    // distinct lexemes against 80, about what a chunk of 1,000 characters of prose holds: fixed,
    // so that a stored weight never needs recomputing.
    await queryRunner.query(
      `CREATE FUNCTION "knowledge_term_weight"(occurrences integer, lexemes integer) RETURNS real
       LANGUAGE sql IMMUTABLE PARALLEL SAFE
       AS $$ SELECT (occurrences * 2.2 / (occurrences + 1.2 * (0.25 + 0.75 * lexemes / 80.0)))::real $$`,
    );
    await queryRunner.query(
      `CREATE TABLE "knowledge_terms" ("organization_id" uuid NOT NULL, "lexeme" text COLLATE "C" NOT NULL, "weight" real NOT NULL, "chunk_id" bigint NOT NULL, "document_id" uuid NOT NULL, CONSTRAINT "knowledge_terms_pkey" PRIMARY KEY ("organization_id", "lexeme", "weight", "chunk_id"))`,
    );
    await queryRunner.query(
      `CREATE TABLE "knowledge_term_refills" ("organization_id" uuid NOT NULL, "lexeme" text COLLATE "C" NOT NULL, CONSTRAINT "knowledge_term_refills_pkey" PRIMARY KEY ("organization_id", "lexeme"))`,
    );
    // No chunk is written or deleted between the copy and the triggers (instances still running
    // the previous version wait here): none is missed, none leaves postings behind.
    await queryRunner.query(`LOCK TABLE "knowledge_chunks" IN SHARE ROW EXCLUSIVE MODE`);
    await queryRunner.query(insertBest('knowledge_chunks'));
    await queryRunner.query(
      `CREATE FUNCTION "knowledge_chunks_index_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       DECLARE
         organization uuid;
         lexemes text[];
       BEGIN
         ${lockOrganizations('new_chunks')};
         ${insertBest('new_chunks')};
         FOR organization, lexemes IN
           SELECT n.organization_id, array_agg(DISTINCT l.lexeme)
             FROM new_chunks n CROSS JOIN LATERAL unnest(tsvector_to_array(n.search)) AS l(lexeme)
            GROUP BY n.organization_id
         LOOP
           DELETE FROM knowledge_terms WHERE ctid = ANY (ARRAY(
             SELECT past.ctid
               FROM (SELECT t.lexeme FROM knowledge_terms t
                      WHERE t.organization_id = organization AND t.lexeme = ANY (lexemes)
                      GROUP BY t.lexeme HAVING count(*) > ${POSTINGS}) k
              CROSS JOIN LATERAL (
                    SELECT t.ctid FROM knowledge_terms t
                     WHERE t.organization_id = organization AND t.lexeme = k.lexeme
                     ORDER BY t.weight DESC, t.chunk_id DESC OFFSET ${POSTINGS}) past));
         END LOOP;
         RETURN NULL;
       END $$`,
    );
    // The trim reads the touched lexemes' postings in one index scan (the lexemes as an array:
    // one descent each, inside the index) and probes only those over POSTINGS: a probe per
    // lexeme, most of them a document's own words, was 0.25 s of a 1 MiB upload's 31,000.
    await queryRunner.query(
      `CREATE TRIGGER "knowledge_chunks_index_terms" AFTER INSERT ON "knowledge_chunks"
       REFERENCING NEW TABLE AS new_chunks
       FOR EACH STATEMENT EXECUTE FUNCTION "knowledge_chunks_index_terms"()`,
    );
    // On delete: the chunks' postings go, each by its key. A lexeme left with fewer than
    // POSTINGS may have had holders it did not list (the postings left and the deleted chunks
    // holding it reach POSTINGS; fewer, and every holder was listed): it is queued in
    // knowledge_term_refills, and KnowledgeTermRefillWorker lists its next best chunks within
    // seconds. Refilling here cost a GIN search and the weights of every chunk holding each such
    // word: 2.5 s to delete a 100-chunk document among 10,000 chunks. An organization left with no
    // chunk (an erasure) has its postings and queue deleted by range.
    await queryRunner.query(
      `CREATE FUNCTION "knowledge_chunks_unindex_terms"() RETURNS trigger LANGUAGE plpgsql AS $$
       DECLARE
         organization uuid;
         lexemes text[];
         deleted bigint[];
       BEGIN
         ${lockOrganizations('old_chunks')};
         FOR organization, lexemes, deleted IN
           SELECT k.organization_id, array_agg(k.lexeme), array_agg(k.deleted)
             FROM (SELECT o.organization_id, l.lexeme COLLATE "C" AS lexeme, count(*) AS deleted
                     FROM old_chunks o CROSS JOIN LATERAL unnest(tsvector_to_array(o.search)) AS l(lexeme)
                    GROUP BY 1, 2) k
            GROUP BY k.organization_id
         LOOP
           IF NOT EXISTS (SELECT FROM knowledge_chunks c WHERE c.organization_id = organization) THEN
             DELETE FROM knowledge_terms WHERE organization_id = organization;
             DELETE FROM knowledge_term_refills WHERE organization_id = organization;
             CONTINUE;
           END IF;
           DELETE FROM knowledge_terms WHERE ctid = ANY (ARRAY(
             SELECT t.ctid FROM (${weighted('(SELECT * FROM old_chunks WHERE organization_id = organization)')}) o
              CROSS JOIN LATERAL (
                    SELECT t.ctid FROM knowledge_terms t
                     WHERE t.organization_id = o.organization_id AND t.lexeme = o.lexeme
                       AND t.weight = o.weight AND t.chunk_id = o.id
                     LIMIT 1) t));
           INSERT INTO knowledge_term_refills (organization_id, lexeme)
           SELECT organization, d.lexeme
             FROM unnest(lexemes, deleted) AS d(lexeme, deleted)
             LEFT JOIN (SELECT t.lexeme, count(*) AS held FROM knowledge_terms t
                         WHERE t.organization_id = organization AND t.lexeme = ANY (lexemes)
                         GROUP BY t.lexeme) h ON h.lexeme = d.lexeme
            WHERE coalesce(h.held, 0) < ${POSTINGS} AND coalesce(h.held, 0) + d.deleted >= ${POSTINGS}
           ON CONFLICT DO NOTHING;
         END LOOP;
         RETURN NULL;
       END $$`,
    );
    await queryRunner.query(
      `CREATE TRIGGER "knowledge_chunks_unindex_terms" AFTER DELETE ON "knowledge_chunks"
       REFERENCING OLD TABLE AS old_chunks
       FOR EACH STATEMENT EXECUTE FUNCTION "knowledge_chunks_unindex_terms"()`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TRIGGER "knowledge_chunks_unindex_terms" ON "knowledge_chunks"`);
    await queryRunner.query(`DROP FUNCTION "knowledge_chunks_unindex_terms"()`);
    await queryRunner.query(`DROP TRIGGER "knowledge_chunks_index_terms" ON "knowledge_chunks"`);
    await queryRunner.query(`DROP FUNCTION "knowledge_chunks_index_terms"()`);
    await queryRunner.query(`DROP TABLE "knowledge_terms"`);
    await queryRunner.query(`DROP TABLE "knowledge_term_refills"`);
    await queryRunner.query(`DROP FUNCTION "knowledge_term_weight"(integer, integer)`);
  }
}
