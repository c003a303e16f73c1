import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * A knowledge chunk's embedding (contract §27): derived data, written by the EmbeddingWorker,
 * deleted with its chunk (cascade: a patched document's old chunks, a deleted document, an erased
 * organization), never exported. Unit length, `real[]` (and `vector`) as memory_embeddings; retrieval compares
 * only the organization's latest EMBEDDINGS_CANDIDATES (docs/knowledge.md).
 */
@Entity('knowledge_chunk_embeddings')
// (organization_id, chunk_id) INCLUDE (model, sketch, document_id): the bound reads only this
// index. TypeORM cannot declare INCLUDE; migration ChunkEmbeddingsCarryDocument creates it.
@Index('knowledge_chunk_embeddings_sketches_idx', { synchronize: false })
export class KnowledgeChunkEmbedding {
  @PrimaryColumn({
    name: 'chunk_id',
    type: 'bigint',
    primaryKeyConstraintName: 'knowledge_chunk_embeddings_pkey',
  })
  @ForeignKey('knowledge_chunks', 'id', {
    onDelete: 'CASCADE',
    name: 'knowledge_chunk_embeddings_chunk_id_fkey',
  })
  chunkId: string;

  /** The chunk's, copied: the bound reads the organization's latest without touching chunks. */
  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  /**
   * The chunk's document, copied (by the writer, or by a trigger where it does not): a reply
   * keeps the candidates of the documents its personality draws on without reading their chunks.
   */
  @Column({ name: 'document_id', type: 'uuid' })
  documentId: string;

  /** Embedder.vectorKind: only like is compared. */
  @Column({ type: 'text' })
  model: string;

  @Column({ type: 'real', array: true })
  embedding: number[];

  /**
   * embedding_sketch(embedding): a bit per dimension, set where it is positive (docs/memory.md).
   * A trigger sets it on every insert and on every change of `embedding`.
   */
  @Column({ type: 'bit varying' })
  sketch: string;
}
