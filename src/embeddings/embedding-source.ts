import { Columns } from '../database/columns';
import { raw, type Sql, sql } from '../database/sql';
import { onlyAsks } from './only-asks';

/** An item to embed: its id in its source and its text. */
export interface PendingItem {
  id: string;
  text: string;
}

/**
 * A table whose rows the EmbeddingWorker embeds. New rows are found in the order of an identity
 * column: the worker keeps a high-water mark per source and model (embedding_cursors), so finding
 * them is an index range scan above it; it queues them (embedding_queue) by their organization.
 */
export interface EmbeddingSource {
  /** The cursor's and the queue's key. */
  readonly name: string;
  /** The last id taken from the source's identity sequence (0 before the first). */
  readonly lastId: Sql;
  /** Up to `limit` rows with `after < id <= upTo`, by id, as `(id, organization_id)`. */
  newRows(after: string, upTo: string, limit: number): Sql;
  /** The texts of the rows of these ids that still exist. */
  texts(ids: readonly string[]): Sql<PendingItem>;
  /** Stores embeddings, `embedded` a JSON array of `{id, embedding}`; a row gone since is skipped. */
  store(embedded: string, model: string): Sql;
  /** Whether a row's text is embedded; one that is not is passed over, found by its words alone. */
  embeds(text: string): boolean;
}

/** The last value of a sequence, as a cursor reads it (a constant name, never user input). */
export function lastValueOf(sequence: string): Sql {
  return sql`SELECT CASE WHEN is_called THEN last_value ELSE 0 END AS last_id FROM ${raw(sequence)}`;
}

const PENDING_MEMORY = Columns.computed<PendingItem>({ id: sql`m.id::text`, text: sql`m.content` });
const PENDING_CHUNK = Columns.computed<PendingItem>({ id: sql`k.id::text`, text: sql`k.text` });

// Each store locks the rows it embeds (FOR KEY SHARE): one deleted by a transaction still open
// is passed over, where the foreign key's check would fail the whole batch once that transaction
// commits. A memory is locked that way (FOR UPDATE) only by what deletes it (a forgetting, an
// erasure's batch, retention), so one locked is skipped, not waited for: an erasure of seconds
// held the store, then failed it on the statement timeout (review, 2026-12-05). Should that
// deletion roll back, the memory stays without an embedding, found by its words alone. A chunk
// is also locked by a PATCH that keeps it (knowledge.repository.ts), for as long as the PATCH's
// short transaction: it is waited for, or its item would leave the queue without an embedding
// (review, 2026-12-05).

/**
 * Memories: each message of a conversation, embedded once for recall and search by meaning; but
 * a message that only asks (onlyAsks) is not.
 */
export const memoriesSource: EmbeddingSource = {
  name: 'memories',
  embeds: (text) => !onlyAsks(text),
  lastId: lastValueOf('memories_id_seq'),
  newRows: (after, upTo, limit) =>
    sql`SELECT m.id, m.organization_id FROM memories m
         WHERE m.id > ${after}::bigint AND m.id <= ${upTo}::bigint
         ORDER BY m.id LIMIT ${limit}`,
  texts: (ids) =>
    PENDING_MEMORY.query`SELECT ${PENDING_MEMORY} FROM memories m
         WHERE m.id = ANY(${ids}::bigint[])`,
  store: (embedded, model) =>
    sql`INSERT INTO memory_embeddings (memory_id, end_user_id, personality_id, model, embedding)
        SELECT m.id, m.end_user_id, m.personality_id, ${model},
               ARRAY(SELECT jsonb_array_elements_text(x -> 'embedding')::real)
          FROM jsonb_array_elements(${embedded}::jsonb) x
          JOIN memories m ON m.id = (x ->> 'id')::bigint
           FOR KEY SHARE OF m SKIP LOCKED
        ON CONFLICT (memory_id) DO UPDATE SET model = excluded.model, embedding = excluded.embedding`,
};

/**
 * Knowledge chunks (docs/knowledge.md): each embedded once; the chunks a PATCH writes anew are new
 * rows with new ids, embedded in turn, and those it does not keep take their embeddings along.
 */
export const knowledgeChunksSource: EmbeddingSource = {
  name: 'knowledge_chunks',
  embeds: () => true,
  lastId: lastValueOf('knowledge_chunks_id_seq'),
  newRows: (after, upTo, limit) =>
    sql`SELECT k.id, k.organization_id FROM knowledge_chunks k
         WHERE k.id > ${after}::bigint AND k.id <= ${upTo}::bigint
         ORDER BY k.id LIMIT ${limit}`,
  texts: (ids) =>
    PENDING_CHUNK.query`SELECT ${PENDING_CHUNK} FROM knowledge_chunks k
         WHERE k.id = ANY(${ids}::bigint[])`,
  store: (embedded, model) =>
    sql`INSERT INTO knowledge_chunk_embeddings (chunk_id, organization_id, document_id, model,
                                                embedding)
        SELECT k.id, k.organization_id, k.document_id, ${model},
               ARRAY(SELECT jsonb_array_elements_text(x -> 'embedding')::real)
          FROM jsonb_array_elements(${embedded}::jsonb) x
          JOIN knowledge_chunks k ON k.id = (x ->> 'id')::bigint
           FOR KEY SHARE OF k
        ON CONFLICT (chunk_id) DO UPDATE SET model = excluded.model, embedding = excluded.embedding`,
};
