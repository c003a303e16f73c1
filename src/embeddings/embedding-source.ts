import { memoryParts } from '../common/text/sentences';
import { Columns } from '../database/columns';
import { raw, type Sql, sql } from '../database/sql';
import { onlyAsks } from './only-asks';

/** A row to embed: its id in its source, its text, and whether its sentences are embedded too. */
export interface PendingItem {
  id: string;
  text: string;
  by_sentence: boolean;
}

/**
 * A table whose rows the EmbeddingWorker embeds, in the order of an identity column: the worker
 * keeps a high-water mark per source and model (embedding_cursors), so finding what is left is an
 * index range scan above it.
 */
export interface EmbeddingSource {
  /** The cursor's key. */
  readonly name: string;
  /** The last id taken from the source's identity sequence (0 before the first). */
  readonly lastId: Sql;
  /** Up to `limit` rows with `after < id <= upTo`, by id, as `(id, text)`. */
  pending(after: string, upTo: string, limit: number): Sql<PendingItem>;
  /**
   * Stores embeddings, `embedded` a JSON array of `{id, embeddings}`, a vector per part of the
   * row's text (null: a part the provider refused); a row gone since is skipped.
   */
  store(embedded: string, model: string): Sql;
  /**
   * What of a row's text is embedded, each part its own vector; none: the row is passed over,
   * found by its words alone.
   */
  parts(item: PendingItem): string[];
}

/** The last value of a sequence, as a cursor reads it (a constant name, never user input). */
export function lastValueOf(sequence: string): Sql {
  return sql`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS last_id FROM ${raw(sequence)}`;
}

const PENDING_MEMORY = Columns.computed<PendingItem>({
  id: sql`m.id::text`,
  text: sql`m.content`,
  by_sentence: sql`m.role = 'user'`,
});
const PENDING_CHUNK = Columns.computed<PendingItem>({
  id: sql`k.id::text`,
  text: sql`k.text`,
  by_sentence: sql`false`,
});

// Each store locks the rows it embeds (FOR KEY SHARE): one deleted by a transaction still open
// (a patched document's old chunks, a forgotten memory) is waited for and then skipped, where the
// foreign key's check would fail the whole batch once that transaction commits.

/**
 * Memories: each message of a conversation, embedded once for recall and search by meaning; the
 * end user's whole and, where it has several sentences, sentence by sentence too (memoryParts;
 * part 0 the whole); the personality's whole only: its replies restate and ask, and their
 * sentences, short and generic ("I am listening."), came nearer a short question than the end
 * user's own statement (test/recall-quality), at the cost of embedding every reply twice. A
 * message that only asks (onlyAsks) is not embedded at all.
 */
export const memoriesSource: EmbeddingSource = {
  name: 'memories',
  parts: ({ text, by_sentence }) => {
    if (onlyAsks(text)) return [];
    if (!by_sentence) return [text];
    const [whole, ...sentences] = memoryParts(text);
    return [whole, ...sentences.filter((sentence) => !onlyAsks(sentence))];
  },
  lastId: lastValueOf('memories_id_seq'),
  pending: (after, upTo, limit) =>
    PENDING_MEMORY.query`SELECT ${PENDING_MEMORY} FROM memories m
         WHERE m.id > ${after}::bigint AND m.id <= ${upTo}::bigint
         ORDER BY m.id LIMIT ${limit}`,
  store: (embedded, model) =>
    sql`INSERT INTO memory_embeddings (memory_id, part, end_user_id, personality_id, model,
                                       embedding)
        SELECT m.id, p.part - 1, m.end_user_id, m.personality_id, ${model},
               ARRAY(SELECT jsonb_array_elements_text(p.embedding)::real)
          FROM jsonb_array_elements(${embedded}::jsonb) x
          JOIN memories m ON m.id = (x ->> 'id')::bigint
         CROSS JOIN LATERAL jsonb_array_elements(x -> 'embeddings') WITH ORDINALITY p(embedding, part)
         WHERE jsonb_typeof(p.embedding) = 'array'
           FOR KEY SHARE OF m
        ON CONFLICT (memory_id, part) DO UPDATE
           SET model = excluded.model, embedding = excluded.embedding`,
};

/**
 * Knowledge chunks (docs/knowledge.md): each embedded once; the chunks a PATCH writes anew are new
 * rows with new ids, embedded in turn, and those it does not keep take their embeddings along.
 */
export const knowledgeChunksSource: EmbeddingSource = {
  name: 'knowledge_chunks',
  parts: ({ text }) => [text],
  lastId: lastValueOf('knowledge_chunks_id_seq'),
  pending: (after, upTo, limit) =>
    PENDING_CHUNK.query`SELECT ${PENDING_CHUNK} FROM knowledge_chunks k
         WHERE k.id > ${after}::bigint AND k.id <= ${upTo}::bigint
         ORDER BY k.id LIMIT ${limit}`,
  store: (embedded, model) =>
    sql`INSERT INTO knowledge_chunk_embeddings (chunk_id, organization_id, document_id, model,
                                                embedding)
        SELECT k.id, k.organization_id, k.document_id, ${model},
               ARRAY(SELECT jsonb_array_elements_text(x -> 'embeddings' -> 0)::real)
          FROM jsonb_array_elements(${embedded}::jsonb) x
          JOIN knowledge_chunks k ON k.id = (x ->> 'id')::bigint
           FOR KEY SHARE OF k
        ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, embedding = excluded.embedding`,
};
