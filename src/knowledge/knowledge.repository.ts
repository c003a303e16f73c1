import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { raw, type Sql, sql } from '../database/sql';
import { fused, type Meaning, nearest, sketchShortlist, wholeVector } from '../embeddings/fusion';
import { CANDIDATES_PER_READ, RETRIEVAL_WORDS } from '../memory/memory-search';
import type { KnowledgeChunk } from './entities/knowledge-chunk.entity';
import type { KnowledgeDocument } from './entities/knowledge-document.entity';
import type { KnowledgeTermRefill } from './entities/knowledge-term-refill.entity';

/**
 * Of the organization's chunks holding a word, the best this many by the word's weight in them
 * are candidates: knowledge_terms keeps no more than this per word (the triggers of migration
 * IndexKnowledgeTerms), so a search reads at most this many postings for each of its
 * RETRIEVAL_WORDS words, in each language of the documents, whatever the organization holds
 * (docs/knowledge.md#search).
 */
export const KNOWLEDGE_POSTINGS_PER_WORD = 128;

/** A document `d`, with the personalities it is attached to (null: all). */
const DOCUMENT = Columns.rowOf<KnowledgeDocument>('d')(
  'id',
  'title',
  'language',
  'bytes',
  'chunks',
  'createdAt',
  'updatedAt',
).and(
  Columns.computed<{ personality_ids: string[] | null }>({
    personality_ids: sql`CASE WHEN d.all_personalities THEN NULL
       ELSE ARRAY(SELECT a.personality_id FROM knowledge_attachments a
                   WHERE a.document_id = d.id ORDER BY a.personality_id)::text[] END`,
  }),
);

export type KnowledgeDocumentRow = RowOf<typeof DOCUMENT>;

const DOCUMENT_WITH_CONTENT = DOCUMENT.and(Columns.rowOf<KnowledgeDocument>('d')('content'));

export type KnowledgeDocumentWithContentRow = RowOf<typeof DOCUMENT_WITH_CONTENT>;

/** A chunk `k` found, with its document `d`'s title. */
const HIT_TEXT = Columns.rowOf<KnowledgeDocument>('d')('title').and(
  Columns.rowOf<KnowledgeChunk>('k')('chunkIndex', 'text'),
);

/** A hit of the full-text ranking alone: `c`, a candidate chunk with its document and score. */
const LEXICAL_HIT = Columns.rowOf<KnowledgeChunk>('c')('documentId')
  .and(HIT_TEXT)
  .and(Columns.computed<{ score: number }>({ score: sql`c.score` }));

export type KnowledgeHit = RowOf<typeof LEXICAL_HIT>;

/** A hit of the fused rankings: `f`, a chunk's fused score. */
const FUSED_HIT: Columns<KnowledgeHit> = Columns.rowOf<KnowledgeChunk>('k')('documentId')
  .and(HIT_TEXT)
  .and(Columns.computed<{ score: number }>({ score: sql`f.score` }));

/** An updated document `d`: its search configuration, and whether its content changed. */
const UPDATED_DOCUMENT = Columns.rowOf<KnowledgeDocument>('d')('searchConfig').and(
  Columns.computed<{ content_changed: boolean }>({
    content_changed: sql`d.content IS DISTINCT FROM before.content_before`,
  }),
);

/** Who draws on the organization's documents `d`, through their attachments `a`. */
const DRAWERS = Columns.computed<{ all_personalities: boolean; personality_ids: string[] }>({
  all_personalities: sql`coalesce(bool_or(d.all_personalities), false)`,
  personality_ids: sql`coalesce(array_agg(DISTINCT a.personality_id::text)
                              FILTER (WHERE a.personality_id IS NOT NULL), '{}')`,
});

/** The sum of documents' bytes: a bigint, which the driver answers as a string. */
const HELD = Columns.computed<{ bytes: string; documents: number; replaced: boolean }>({
  bytes: sql`coalesce(sum(d.bytes) FILTER (WHERE d.replaced IS NOT TRUE), 0)`,
  documents: sql`(count(*) FILTER (WHERE d.replaced IS NOT TRUE))::int`,
  replaced: sql`coalesce(bool_or(d.replaced), false)`,
});

/** The organization's bytes written today after a write, null when the write would pass the day's. */
const WRITTEN_TODAY = Columns.computed<{ bytes: string | null }>({
  bytes: sql`(SELECT bytes FROM counted)`,
});

/** The bytes of the chunks a PATCH writes anew: a bigint, which the driver answers as a string. */
const WRITTEN_BYTES = Columns.computed<{ bytes: string }>({
  bytes: sql`coalesce(sum(bytes), 0)::bigint`,
});

/**
 * Writes the document's `chunks` at their positions (their lexemes in its language) where `at`
 * holds of the position `c.ordinality - 1`: all of a new document's, or those a PATCH frees.
 */
function insertChunks(
  document: { id: string; organizationId: string; searchConfig: string; chunks: string[] },
  at: Sql,
): Sql {
  const { id, organizationId, searchConfig, chunks } = document;
  return sql`INSERT INTO knowledge_chunks (document_id, chunk_index, organization_id, search_config,
                                           text, search)
             SELECT ${id}, c.ordinality - 1, ${organizationId}, ${searchConfig}, c.text,
                    to_tsvector(${searchConfig}::regconfig, c.text)
               FROM unnest(${chunks}::text[]) WITH ORDINALITY AS c(text, ordinality)
              WHERE ${at}
                -- Only into a document of the organization named (the chunks' rows say whose).
                AND EXISTS (SELECT FROM knowledge_documents d
                             WHERE d.id = ${id} AND d.organization_id = ${organizationId})`;
}

/**
 * The chunks of a document that its new content `chunks` keeps, as the CTEs `new_chunks (text,
 * chunk_index)` and `kept (id, was, becomes)`: the n-th chunk of a text in the new content is the
 * n-th chunk of that text in the old (read, and locked again, in id order).
 */
function keptChunks(organizationId: string, id: string, chunks: string[]): Sql {
  return sql`
    new_chunks AS (
      SELECT c.text, c.ordinality - 1 AS chunk_index,
             row_number() OVER (PARTITION BY c.text ORDER BY c.ordinality) AS occurrence
        FROM unnest(${chunks}::text[]) WITH ORDINALITY AS c(text, ordinality)),
    old_chunks AS (
      SELECT k.id, k.chunk_index, k.text,
             row_number() OVER (PARTITION BY k.text ORDER BY k.chunk_index) AS occurrence
        FROM (SELECT id, chunk_index, text FROM knowledge_chunks
               WHERE document_id = ${id} AND organization_id = ${organizationId}
               ORDER BY id FOR UPDATE) k),
    kept AS (
      SELECT o.id, o.chunk_index AS was, n.chunk_index AS becomes
        FROM old_chunks o JOIN new_chunks n ON n.text = o.text AND n.occurrence = o.occurrence)`;
}

const PERSONALITIES_FOUND = Columns.computed<{ n: number }>({ n: sql`count(*)::int` });

const DOCUMENT_ID = Columns.rowOf<KnowledgeDocument>()('id');

const DOCUMENT_BYTES = Columns.rowOf<KnowledgeDocument>()('bytes');

const REFILL = Columns.rowOf<KnowledgeTermRefill>()('organizationId', 'lexeme');
const QUEUED_ORGANIZATION = Columns.rowOf<KnowledgeTermRefill>()('organizationId');
/** Below every organization's id: the refill's rotation starts from it. */
const NO_ORGANIZATION = '00000000-0000-0000-0000-000000000000';

/**
 * A refill's transaction stops taking lexemes once this long has gone: it holds the
 * organization's lock, which the organization's writes wait for.
 */
const REFILL_TRANSACTION_MS = 250;

/**
 * Chunks holding a word that a refill weighs at most: the first found, not every one. Weighing
 * reads each chunk's whole tsvector, about 16 µs a chunk: a word in the 26,000 chunks of 25 MiB of
 * knowledge took 0.4 to 0.7 s a statement, and every word a deleted document held was refilled so
 * (hostile review). 2,048 bound a word's refill to about 40 ms; a word held by more chunks than
 * that gets the best 128 of those found, in the table's order (roughly the oldest first): its
 * postings then favour older documents until new chunks' own inserts add their best.
 */
const REFILL_SAMPLE = 2_048;

/**
 * Tops `lexeme` up to KNOWLEDGE_POSTINGS_PER_WORD postings from the organization's chunks holding
 * it (the first REFILL_SAMPLE found), best weight first. The lexeme is matched as a quoted tsquery
 * operand ('' and \ escaped), as retrieval does.
 */
function refillStatement(organizationId: string, lexeme: string): Sql {
  return sql`WITH held AS MATERIALIZED (
           SELECT ARRAY(SELECT t.chunk_id FROM knowledge_terms t
                         WHERE t.organization_id = ${organizationId} AND t.lexeme = ${lexeme}
                         LIMIT ${KNOWLEDGE_POSTINGS_PER_WORD}) AS chunk_ids)
    INSERT INTO knowledge_terms (organization_id, lexeme, weight, chunk_id, document_id)
    SELECT ${organizationId}::uuid, ${lexeme}::text, r.weight, r.id, r.document_id
      FROM held h
     CROSS JOIN LATERAL (
           SELECT c.id, c.document_id,
                  knowledge_term_weight(coalesce(array_length(l.positions, 1), 1), length(c.search)) AS weight
             FROM (SELECT c.id, c.document_id, c.search FROM knowledge_chunks c
                    WHERE c.organization_id = ${organizationId}
                      AND c.search @@ ('''' || replace(replace(${lexeme}, '\\', '\\\\'), '''', '''''') || '''')::tsquery
                      AND c.id <> ALL (h.chunk_ids)
                    LIMIT ${REFILL_SAMPLE}) c
            CROSS JOIN LATERAL unnest(c.search) AS l
            WHERE l.lexeme = ${lexeme}
            ORDER BY weight DESC, c.id DESC
            LIMIT ${KNOWLEDGE_POSTINGS_PER_WORD} - cardinality(h.chunk_ids)) r
     WHERE cardinality(h.chunk_ids) < ${KNOWLEDGE_POSTINGS_PER_WORD}`;
}

/** The personalities an organization's documents are attached to: all of them, or these. */
export interface KnowledgeDrawers {
  all: boolean;
  personalityIds: string[];
}

/** What a document is written with: its text as stored, and its chunks. */
export interface DocumentText {
  content: string;
  bytes: number;
  chunks: string[];
}

/** The documents a personality draws on: those attached to all, or to it (null: any). */
function attachedTo(personalityId: string | null): Sql {
  return sql`(${personalityId}::uuid IS NULL OR d.all_personalities OR EXISTS (
      SELECT FROM knowledge_attachments a
       WHERE a.document_id = d.id AND a.personality_id = ${personalityId}::uuid))`;
}

/**
 * BM25's inverse document frequency, over the organization's chunks (`total.chunks`) and the chunks
 * holding the lexeme among its postings (`df.n`, exact up to the word's share of the read's
 * candidates, that share beyond): a word few chunks hold weighs more than one many hold, never
 * less than nothing.
 */
const BM25_IDF = raw('ln(1 + (total.chunks - df.n + 0.5) / (df.n + 0.5))');

/**
 * The chunks of the organization's documents (attached to the personality, when given) holding
 * any word of `text`: rows `(id, document_id, score)`, unordered. The text gives at
 * most RETRIEVAL_WORDS lexemes, its first distinct ones, in each language the personality's
 * documents are in, and each lexeme at most KNOWLEDGE_POSTINGS_PER_WORD chunks, its best-weighted
 * in the organization, by one range scan of knowledge_terms' primary key: that is all the table
 * keeps of it, so no plan, with statistics or without, reads more. The read takes at most
 * CANDIDATES_PER_READ postings, shared evenly by its distinct lexemes, as memory recall does: 128
 * each up to 8 lexemes, 32 each for 32 (a long message of words the documents hold often would
 * otherwise read 4,096 postings for each language of the documents). `score` is BM25: the sum over
 * the chunk's words of the word's weight in it (stored with the posting: how often the chunk
 * says it, for its length) times its rarity in the organization (BM25_IDF). A chunk is read only
 * when it is answered. A word more than KNOWLEDGE_POSTINGS_PER_WORD chunks hold is common in the
 * organization: a chunk where it weighs little and no rarer word of the message is found is not
 * found; postings of documents not attached to the personality count toward the word's cap.
 *
 * The organization's documents are read once, into one map of the documents the personality
 * draws on to their language, which each posting looks up: joined as rows instead, a generic plan
 * without statistics nested its 512 postings over the documents, 6 ms instead of 2
 * (docs/knowledge.md#search).
 */
function matchingChunks(organizationId: string, personalityId: string | null, text: string): Sql {
  return sql`
    WITH documents AS MATERIALIZED (
           SELECT coalesce(jsonb_object_agg(d.id, d.search_config)
                             FILTER (WHERE ${attachedTo(personalityId)}), '{}') AS drawn,
                  greatest(sum(d.chunks), 1)::float8 AS chunks
             FROM knowledge_documents d
            WHERE d.organization_id = ${organizationId}),
         lexemes AS MATERIALIZED (
           SELECT c.search_config, w.lexeme
             FROM (SELECT DISTINCT v.search_config
                     FROM documents, jsonb_each_text(documents.drawn) AS v(id, search_config)) c
            CROSS JOIN LATERAL (
                  SELECT v.lexeme FROM unnest(to_tsvector(c.search_config::regconfig, ${text})) AS v
                   ORDER BY v.positions[1], v.lexeme LIMIT ${RETRIEVAL_WORDS}) w),
         postings AS MATERIALIZED (
           SELECT w.lexeme, t.chunk_id, t.document_id, t.weight::float8 AS weight,
                  documents.drawn ->> t.document_id::text AS search_config
             FROM (SELECT d.lexeme, count(*) OVER ()::int AS lexemes
                    FROM (SELECT DISTINCT lexeme FROM lexemes) d) w
            CROSS JOIN LATERAL (
                  SELECT t.chunk_id, t.document_id, t.weight FROM knowledge_terms t
                   WHERE t.organization_id = ${organizationId} AND t.lexeme = w.lexeme
                   ORDER BY t.weight DESC, t.chunk_id DESC
                   LIMIT greatest(1, least(${KNOWLEDGE_POSTINGS_PER_WORD}::int,
                                           ${CANDIDATES_PER_READ}::int / w.lexemes))) t
            CROSS JOIN documents),
         df AS MATERIALIZED (SELECT lexeme, count(*)::float8 AS n FROM postings GROUP BY lexeme)
    SELECT p.chunk_id AS id, p.document_id, sum(${BM25_IDF} * p.weight) AS score
      FROM postings p
      JOIN lexemes l ON l.lexeme = p.lexeme AND l.search_config = p.search_config
      JOIN df ON df.lexeme = p.lexeme
     CROSS JOIN documents total
     GROUP BY p.chunk_id, p.document_id`;
}

/** The full-text order: the higher score, then the chunk written first. */
const LEXICAL_ORDER = sql`score DESC, id`;

/**
 * The `limit` chunks most relevant to `text`, best first, as KnowledgeHit rows; only the chunks
 * answered are read whole (their text). Without `meaning`: the full-text ranking
 * (matchingChunks). With it: that ranking and the embedding ranking merged by reciprocal rank
 * fusion (fusion.ts, as memories; `score`: the fused one), each giving twice `limit`: a chunk
 * not yet embedded is found by its words alone, one sharing no word by its meaning. The
 * embedding ranking reads the sketches of the organization's latest EMBEDDINGS_CANDIDATES chunk
 * embeddings (an index-only range scan of knowledge_chunk_embeddings_sketches_idx), keeps
 * those of the question's model in documents attached to the personality, and compares the whole
 * vectors of the nearest by sketch only (sketchShortlist): its cost is bounded by
 * EMBEDDINGS_CANDIDATES whatever chunks the organization holds; its documents are read, as the
 * ranking by words reads them (docs/knowledge.md).
 */
export function rankedChunks(
  organizationId: string,
  personalityId: string | null,
  text: string,
  limit: number,
  meaning: Meaning | null,
): Sql<KnowledgeHit> {
  if (!meaning) {
    return LEXICAL_HIT.query`
      WITH candidates AS MATERIALIZED (${matchingChunks(organizationId, personalityId, text)})
      SELECT ${LEXICAL_HIT}
        FROM (SELECT * FROM candidates ORDER BY ${LEXICAL_ORDER} LIMIT ${limit}) c
        JOIN knowledge_chunks k ON k.id = c.id AND k.organization_id = ${organizationId}
        JOIN knowledge_documents d ON d.id = c.document_id AND d.organization_id = ${organizationId}
       ORDER BY c.score DESC, c.id`;
  }
  const depth = limit * 2;
  const lexical = sql`
    SELECT c.id, row_number() OVER (ORDER BY ${LEXICAL_ORDER}) AS rank
      FROM (${matchingChunks(organizationId, personalityId, text)}) c
     ORDER BY rank LIMIT ${depth}`;
  const latest = sql`
    SELECT x.chunk_id, x.document_id, x.model, x.sketch FROM knowledge_chunk_embeddings x
     WHERE x.organization_id = ${organizationId}
     ORDER BY x.chunk_id DESC LIMIT ${meaning.candidates}`;
  // A search reads every document: the sketches alone. So does a reply whose personality draws on
  // every document of the organization: no document is closed to it (decided once, before either
  // branch runs; the scan stops at the first closed one). Otherwise it keeps the candidates of the
  // documents attached to it, by the document each carries (migration ChunkEmbeddingsCarryDocument).
  const allSketches = sql`SELECT x.chunk_id AS id, x.sketch FROM (${latest}) x WHERE x.model = ${meaning.model}`;
  let sketches = allSketches;
  if (personalityId) {
    sketches = sql`
      WITH every_document AS MATERIALIZED (
        SELECT NOT EXISTS (SELECT FROM knowledge_documents d
                            WHERE d.organization_id = ${organizationId} AND NOT ${attachedTo(personalityId)}) AS drawn)
      SELECT s.id, s.sketch FROM (${allSketches}) s
       WHERE (SELECT drawn FROM every_document)
      UNION ALL
      SELECT x.chunk_id AS id, x.sketch
        FROM (${latest}) x
       WHERE x.model = ${meaning.model} AND NOT (SELECT drawn FROM every_document)
         AND x.document_id IN (SELECT d.id FROM knowledge_documents d
                                WHERE d.organization_id = ${organizationId} AND ${attachedTo(personalityId)})`;
  }
  const compared = sql`
    SELECT x.chunk_id AS id, ${wholeVector(meaning)} AS whole
      FROM (${sketchShortlist(sketches, meaning, depth)}) s
      JOIN knowledge_chunk_embeddings x ON x.chunk_id = s.id AND x.organization_id = ${organizationId}`;
  return FUSED_HIT.query`
    SELECT ${FUSED_HIT}
      FROM (${fused(lexical, nearest(compared, meaning, depth), limit)}) f
      JOIN knowledge_chunks k ON k.id = f.id AND k.organization_id = ${organizationId}
      -- The embedding ranking kept candidates by the document each carries: checked here.
      JOIN knowledge_documents d ON d.id = k.document_id AND d.organization_id = ${organizationId}
       AND ${attachedTo(personalityId)}
     ORDER BY f.score DESC, f.id DESC`;
}

@Injectable()
export class KnowledgeRepository {
  constructor(private readonly database: Database) {}

  /**
   * Serializes the organization's writes of documents until the transaction ends, so that the
   * sum of their bytes is read and changed by one of them at a time (KNOWLEDGE_MAX_BYTES).
   */
  async lockOrganization(manager: EntityManager, organizationId: string): Promise<void> {
    await this.database.count(
      sql`SELECT pg_advisory_xact_lock(hashtextextended('knowledge:' || ${organizationId}, 0))`,
      { manager },
    );
  }

  /**
   * The bytes and the count of the organization's documents, but the one being replaced, and
   * whether that one is the organization's.
   */
  async held(
    manager: EntityManager,
    organizationId: string,
    except: string | null,
  ): Promise<{ bytes: number; documents: number; replaced: boolean }> {
    const row = await this.database.row(
      HELD.query`SELECT ${HELD}
            FROM (SELECT bytes, id = ${except}::uuid AS replaced FROM knowledge_documents
                   WHERE organization_id = ${organizationId}) d`,
      { manager },
    );
    return {
      bytes: Number(row?.bytes ?? 0),
      documents: row?.documents ?? 0,
      replaced: row?.replaced ?? false,
    };
  }

  /**
   * Adds `bytes` to what the organization wrote on `day` (UTC), unless that would pass `max`: the
   * day's total after, or null when refused (nothing counted). Rows before the day before go with
   * it: an instance whose clock is a little behind, near midnight, still finds its day's row.
   */
  async countWritten(
    manager: EntityManager,
    organizationId: string,
    day: string,
    bytes: number,
    max: number,
  ): Promise<number | null> {
    const row = await this.database.row(
      WRITTEN_TODAY.query`WITH earlier AS (
             DELETE FROM knowledge_daily_writes
              WHERE organization_id = ${organizationId} AND day < ${day}::date - 1),
           counted AS (
             INSERT INTO knowledge_daily_writes AS w (organization_id, day, bytes)
             SELECT ${organizationId}, ${day}::date, ${bytes}::bigint
              WHERE ${bytes}::bigint <= ${max}::bigint
             ON CONFLICT (organization_id, day) DO UPDATE SET bytes = w.bytes + excluded.bytes
              WHERE w.bytes + excluded.bytes <= ${max}::bigint
             RETURNING w.bytes)
         SELECT ${WRITTEN_TODAY}`,
      { manager },
    );
    return row?.bytes == null ? null : Number(row.bytes);
  }

  /** How many of `ids` are personalities of the organization. */
  async countPersonalities(organizationId: string, ids: string[]): Promise<number> {
    const row = await this.database.row(
      PERSONALITIES_FOUND.query`SELECT ${PERSONALITIES_FOUND} FROM personalities
           WHERE organization_id = ${organizationId} AND id = ANY(${ids}::uuid[])`,
    );
    return row?.n ?? 0;
  }

  /**
   * How many of `ids` are personalities of the organization, for attachments in their
   * transaction: the ones found are locked until it ends (FOR KEY SHARE), so that a deletion of
   * one waits for the attachments instead of failing their foreign key in between (found by
   * review: a POST beside the personality's DELETE answered 500). A search counts without
   * locking: a row lock writes.
   */
  async lockPersonalities(
    manager: EntityManager,
    organizationId: string,
    ids: string[],
  ): Promise<number> {
    const row = await this.database.row(
      PERSONALITIES_FOUND.query`SELECT ${PERSONALITIES_FOUND} FROM (
           SELECT FROM personalities
            WHERE organization_id = ${organizationId} AND id = ANY(${ids}::uuid[])
              FOR KEY SHARE) p`,
      { manager },
    );
    return row?.n ?? 0;
  }

  async insert(
    manager: EntityManager,
    document: {
      organizationId: string;
      title: string;
      language: string;
      searchConfig: string;
      text: DocumentText;
      at: Date;
    },
  ): Promise<string> {
    const row = await this.database.row(
      DOCUMENT_ID.query`INSERT INTO knowledge_documents (organization_id, title, language, search_config, content,
                                           bytes, chunks, all_personalities, created_at, updated_at)
          VALUES (${document.organizationId}, ${document.title}, ${document.language},
                  ${document.searchConfig}, ${document.text.content}, ${document.text.bytes},
                  ${document.text.chunks.length}, true, ${document.at}, ${document.at})
          RETURNING ${DOCUMENT_ID}`,
      { manager },
    );
    return row!.id;
  }

  /** Changes what is given; undefined when the document is not the organization's. */
  async update(
    manager: EntityManager,
    organizationId: string,
    id: string,
    changes: { title?: string; text?: DocumentText; at: Date },
  ): Promise<RowOf<typeof UPDATED_DOCUMENT> | undefined> {
    const { title, text, at } = changes;
    return this.database.row(
      UPDATED_DOCUMENT.query`UPDATE knowledge_documents d
             SET title = coalesce(${title ?? null}::text, d.title),
                 content = coalesce(${text?.content ?? null}::text, d.content),
                 bytes = coalesce(${text?.bytes ?? null}::int, d.bytes),
                 chunks = coalesce(${text?.chunks.length ?? null}::int, d.chunks),
                 updated_at = ${at}
            FROM (SELECT content AS content_before FROM knowledge_documents
                   WHERE organization_id = ${organizationId} AND id = ${id}
                     FOR UPDATE) before
           WHERE d.organization_id = ${organizationId} AND d.id = ${id}
          RETURNING ${UPDATED_DOCUMENT}`,
      { manager },
    );
  }

  /** Attaches the document to these personalities (the organization's), or to all (null). */
  async attach(
    manager: EntityManager,
    organizationId: string,
    id: string,
    personalityIds: string[] | null,
  ): Promise<void> {
    // Two statements: an INSERT does not see a DELETE of the same statement (one snapshot).
    await this.database.count(
      sql`WITH marked AS (UPDATE knowledge_documents SET all_personalities = ${personalityIds === null}
                           WHERE id = ${id} AND organization_id = ${organizationId})
          DELETE FROM knowledge_attachments
           WHERE document_id = ${id} AND organization_id = ${organizationId}`,
      { manager },
    );
    await this.database.count(
      sql`INSERT INTO knowledge_attachments (document_id, personality_id, organization_id)
          SELECT ${id}, p.id, p.organization_id FROM personalities p
           WHERE p.organization_id = ${organizationId} AND p.id = ANY(${personalityIds ?? []}::uuid[])`,
      { manager },
    );
  }

  /**
   * Locks the document's chunks, in id order as the EmbeddingWorker's store does (locked in
   * another order, a PATCH and a store deadlocked), and answers the bytes of the chunks of the
   * new content that replaceChunks will write anew: before any is written, so that a write past
   * the day's bytes costs no indexing.
   */
  async newChunkBytes(
    manager: EntityManager,
    organizationId: string,
    id: string,
    chunks: string[],
  ): Promise<number> {
    // On its own: in the statement below, new content of no chunk would not read the old ones.
    await this.database.count(
      sql`SELECT FROM (SELECT FROM knowledge_chunks
                        WHERE document_id = ${id} AND organization_id = ${organizationId}
                        ORDER BY id FOR UPDATE) locked`,
      { manager },
    );
    const row = await this.database.row(
      WRITTEN_BYTES.query`WITH ${keptChunks(organizationId, id, chunks)}
         SELECT ${WRITTEN_BYTES}
           FROM (SELECT octet_length(n.text) AS bytes FROM new_chunks n
                  WHERE n.chunk_index NOT IN (SELECT becomes FROM kept)) written`,
      { manager },
    );
    return Number(row?.bytes ?? 0);
  }

  /**
   * The document's new content's chunks, in place of its old ones: a chunk whose text the old
   * content held too is kept (its id, postings and embedding) and moved to its new position; the
   * others go, and the new texts are written (their lexemes in the document's language, new ids
   * the EmbeddingWorker embeds). Searchable on commit. Positions are moved through negative ones,
   * so that no two chunks hold one position at any statement's end.
   */
  async replaceChunks(
    manager: EntityManager,
    organizationId: string,
    id: string,
    searchConfig: string,
    chunks: string[],
  ): Promise<void> {
    await this.database.count(
      sql`WITH ${keptChunks(organizationId, id, chunks)},
               gone AS (DELETE FROM knowledge_chunks k
                         WHERE k.document_id = ${id} AND k.organization_id = ${organizationId}
                           AND k.id NOT IN (SELECT id FROM kept))
          UPDATE knowledge_chunks k SET chunk_index = -1 - kept.becomes
            FROM kept
           WHERE k.document_id = ${id} AND k.organization_id = ${organizationId}
             AND k.id = kept.id AND kept.was <> kept.becomes`,
      { manager },
    );
    // The positions no kept chunk takes: a kept one is at its new position, or moved below 0.
    await this.database.count(
      insertChunks(
        { id, organizationId, searchConfig, chunks },
        sql`c.ordinality - 1 NOT IN (
              SELECT CASE WHEN k.chunk_index < 0 THEN -1 - k.chunk_index ELSE k.chunk_index END
                FROM knowledge_chunks k
               WHERE k.document_id = ${id} AND k.organization_id = ${organizationId})`,
      ),
      { manager },
    );
    await this.database.count(
      sql`UPDATE knowledge_chunks SET chunk_index = -1 - chunk_index
           WHERE document_id = ${id} AND organization_id = ${organizationId} AND chunk_index < 0`,
      { manager },
    );
  }

  /** A new document's chunks, with their lexemes in its language: searchable on commit. */
  async writeChunks(
    manager: EntityManager,
    organizationId: string,
    id: string,
    searchConfig: string,
    chunks: string[],
  ): Promise<void> {
    await this.database.count(
      insertChunks({ id, organizationId, searchConfig, chunks }, sql`true`),
      { manager },
    );
  }

  /**
   * The bytes the document holds now (0 for none): what its deletion, or a PATCH of its content,
   * takes away with its chunks' postings.
   */
  async bytesHeld(organizationId: string, id: string): Promise<number> {
    const row = await this.database.row(
      DOCUMENT_BYTES.query`SELECT ${DOCUMENT_BYTES} FROM knowledge_documents
           WHERE id = ${id} AND organization_id = ${organizationId}`,
    );
    return row?.bytes ?? 0;
  }

  find(
    organizationId: string,
    id: string,
    manager?: EntityManager,
  ): Promise<KnowledgeDocumentWithContentRow | undefined> {
    return this.database.row(
      DOCUMENT_WITH_CONTENT.query`SELECT ${DOCUMENT_WITH_CONTENT} FROM knowledge_documents d
           WHERE d.organization_id = ${organizationId} AND d.id = ${id}`,
      { manager },
    );
  }

  /** Oldest first, `limit + 1` rows (the extra one tells whether more follow). */
  findPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<KnowledgeDocumentRow[]> {
    const keyset: Keyset = {
      table: 'knowledge_documents',
      alias: 'd',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'asc',
    };
    return this.database.rows(
      DOCUMENT.query`SELECT ${DOCUMENT} FROM knowledge_documents d
           WHERE d.organization_id = ${organizationId} AND ${keysetAfter(keyset)}
           ORDER BY ${keysetOrder(keyset)} LIMIT ${limit + 1}`,
    );
  }

  /** Who draws on the organization's documents: one row, through its documents' index. */
  async drawers(organizationId: string, timeoutMs: number): Promise<KnowledgeDrawers> {
    const [row] = await this.database.rowsWithin(
      DRAWERS.query`SELECT ${DRAWERS}
            FROM knowledge_documents d
            LEFT JOIN knowledge_attachments a ON a.document_id = d.id
           WHERE d.organization_id = ${organizationId}`,
      timeoutMs,
    );
    return { all: row?.all_personalities ?? false, personalityIds: row?.personality_ids ?? [] };
  }

  /**
   * Whether there was such a document; its chunks and attachments go with it (cascade). The
   * organization's lock first, as every write of its documents takes it: the cascade's trigger
   * takes it too, and a content patch holding it while it waits for this row would deadlock.
   */
  async remove(organizationId: string, id: string): Promise<boolean> {
    return this.database.transaction(async (manager) => {
      await this.lockOrganization(manager, organizationId);
      const count = await this.database.count(
        sql`DELETE FROM knowledge_documents WHERE organization_id = ${organizationId} AND id = ${id}`,
        { manager },
      );
      return count > 0;
    });
  }

  /**
   * The first organization with lexemes queued for refill after `after` (past the last, the
   * first of all); null: none queued.
   */
  async nextToRefill(after: string | null): Promise<string | null> {
    const next =
      (await this.database.row(
        QUEUED_ORGANIZATION.query`SELECT ${QUEUED_ORGANIZATION} FROM knowledge_term_refills
             WHERE organization_id > ${after ?? NO_ORGANIZATION}::uuid
             ORDER BY organization_id LIMIT 1`,
      )) ??
      (after === null
        ? undefined
        : await this.database.row(
            QUEUED_ORGANIZATION.query`SELECT ${QUEUED_ORGANIZATION} FROM knowledge_term_refills
                 ORDER BY organization_id LIMIT 1`,
          ));
    return next?.organization_id ?? null;
  }

  /**
   * Lists the next best chunks of the organization's queued lexemes (knowledge_term_refills), in
   * one transaction: its lock first (so a write in progress commits first and is seen; a
   * document's deletion, whose trigger deletes the organization's queue rows while holding the
   * lock, is never waited for while holding those rows), then up to `batchSize` of its queue
   * rows, skipping those another instance holds; each lexeme topped up to
   * KNOWLEDGE_POSTINGS_PER_WORD from the chunks holding it (the GIN index, weights as the
   * triggers compute them), one statement a lexeme, until REFILL_TRANSACTION_MS have gone; the
   * rows refilled deleted. Answers how many.
   *
   * A lexeme's cost grows with the chunks holding it (about 1.7 ms at 200, docs/knowledge.md): a
   * batch of 100 common words of an organization near KNOWLEDGE_MAX_BYTES ran past the statement
   * timeout, rolled back, and, the queue read in organization order, was taken first again by
   * every run: no organization's words were refilled again, and the organizations batched with
   * it had their writes held behind its lock (found by review).
   */
  async refillPostings(organizationId: string, batchSize: number): Promise<number> {
    return this.database.transaction(async (manager) => {
      await this.lockOrganization(manager, organizationId);
      // The sample is read through the GIN index, never by a scan of every tenant's chunks that
      // stops at the sample's end: statistics can make that look cheaper, and it is not when the
      // organization's chunks lie late in the table.
      await this.database.count(sql`SET LOCAL enable_seqscan = off`, { manager });
      const queued = await this.database.rows(
        REFILL.query`SELECT ${REFILL} FROM knowledge_term_refills
             WHERE organization_id = ${organizationId}
             ORDER BY lexeme LIMIT ${batchSize} FOR UPDATE SKIP LOCKED`,
        { manager },
      );
      const started = performance.now();
      const refilled: string[] = [];
      for (const { lexeme } of queued) {
        await this.database.count(refillStatement(organizationId, lexeme), { manager });
        refilled.push(lexeme);
        if (performance.now() - started >= REFILL_TRANSACTION_MS) break;
      }
      if (refilled.length > 0) {
        await this.database.count(
          sql`DELETE FROM knowledge_term_refills
               WHERE organization_id = ${organizationId} AND lexeme = ANY (${refilled}::text[])`,
          { manager },
        );
      }
      return refilled.length;
    });
  }

  search(
    organizationId: string,
    personalityId: string | null,
    text: string,
    limit: number,
    meaning: Meaning | null,
  ): Promise<KnowledgeHit[]> {
    return this.database.rows(rankedChunks(organizationId, personalityId, text, limit, meaning), {
      prepared: true,
    });
  }

  /**
   * The chunks a reply is given (rankedChunks for the personality), within `timeoutMs` of
   * database time: past it this rejects with SQLSTATE 57014 and the reply goes on without.
   */
  recall(
    organizationId: string,
    personalityId: string,
    text: string,
    limit: number,
    meaning: Meaning | null,
    timeoutMs: number,
  ): Promise<KnowledgeHit[]> {
    return this.database.rowsWithin(
      rankedChunks(organizationId, personalityId, text, limit, meaning),
      timeoutMs,
      { prepared: true },
    );
  }
}
