import { Column, Entity, Index, JoinColumn, ManyToOne, PrimaryColumn } from 'typeorm';
import { Memory } from '../../memory/entities/memory.entity';

/**
 * A memory's embedding (contract §27): derived data, written by the EmbeddingWorker, deleted with
 * its memory (cascade) or with its end user (the memories' erasure), never exported. Unit length,
 * so a dot product is the cosine. `real[]`: the extension is not installed everywhere; where it
 * is, a `vector` copy that no entity declares (a trigger writes it, migration
 * AddPgvectorColumns). Recall compares only the end user's latest EMBEDDINGS_CANDIDATES.
 */
@Entity('memory_embeddings')
// (end_user_id, memory_id) INCLUDE (personality_id, model, sketch): the bound reads only this
// index. TypeORM cannot declare INCLUDE; migration AddEmbeddingSketches creates it.
@Index('memory_embeddings_sketches_idx', { synchronize: false })
export class MemoryEmbedding {
  @PrimaryColumn({
    name: 'memory_id',
    type: 'bigint',
    primaryKeyConstraintName: 'memory_embeddings_pkey',
  })
  memoryId: string;

  @ManyToOne(() => Memory, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'memory_id', foreignKeyConstraintName: 'memory_embeddings_memory_id_fkey' })
  memory?: Memory;

  /** The memory's, copied: the bound reads the end user's latest without touching memories. */
  @Column({ name: 'end_user_id', type: 'uuid' })
  endUserId: string;

  @Column({ name: 'personality_id', type: 'uuid' })
  personalityId: string;

  /** What made it (Embedder.vectorKind: the model, and the dimensions asked for): only like is compared. */
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
