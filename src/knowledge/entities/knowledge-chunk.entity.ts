import { Column, Entity, ForeignKey, Index, PrimaryColumn, Unique } from 'typeorm';

/**
 * A piece of a document (chunker.ts), searched by its words in the document's language.
 * knowledge_chunks_search_idx (GIN over btree_gin on organization_id and search) is the
 * migration's: TypeORM cannot declare it.
 */
@Entity('knowledge_chunks')
@Index('knowledge_chunks_search_idx', { synchronize: false })
@Unique('knowledge_chunks_id_key', ['id'])
export class KnowledgeChunk {
  /**
   * In insertion order, never reused: the EmbeddingWorker's high-water mark (knowledgeChunksSource).
   * A PATCH keeps the chunks whose text it keeps (KnowledgeRepository.replaceChunks); the others
   * are written anew, with new ids, and embedded.
   */
  @Column({ type: 'bigint', generated: 'identity', generatedIdentity: 'ALWAYS' })
  id: string;

  @PrimaryColumn({ name: 'document_id', type: 'uuid' })
  @ForeignKey('knowledge_documents', {
    onDelete: 'CASCADE',
    name: 'knowledge_chunks_document_id_fkey',
  })
  documentId: string;

  @PrimaryColumn({ name: 'chunk_index', type: 'integer' })
  chunkIndex: number;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @Column({ name: 'search_config', type: 'text' })
  searchConfig: string;

  @Column({ type: 'text' })
  text: string;

  @Column({ type: 'tsvector', select: false })
  search: string;
}
