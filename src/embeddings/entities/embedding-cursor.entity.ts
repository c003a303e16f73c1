import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * How far the EmbeddingWorker has queued one source (e.g. `memories`) for one model (and
 * dimensions: Embedder.vectorKind) in embedding_queue: a high-water mark over the source's
 * ordered ids, so finding what is new is one index range scan whatever the table holds, and a
 * reply writes nothing for it. `safe_bound` is the highest id that no transaction still running
 * can hold (see EmbeddingWorker.advance): ids are taken before commit, so a newer id can be
 * visible before an older one is.
 */
@Entity('embedding_cursors')
export class EmbeddingCursor {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'embedding_cursors_pkey' })
  source: string;

  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'embedding_cursors_pkey' })
  model: string;

  /** Every id up to this one is queued, embedded or passed over. */
  @Column({ type: 'bigint', default: 0 })
  position: string;

  /** Ids up to this one are final: committed or never to be. */
  @Column({ name: 'safe_bound', type: 'bigint', default: 0 })
  safeBound: string;

  /** The source's last id taken when last read, final once pending_xmax is behind every snapshot. */
  @Column({ name: 'pending_bound', type: 'bigint', nullable: true })
  pendingBound: string | null;

  /** A snapshot's xmax taken a poll after pending_bound (as text::bigint of xid8). */
  @Column({ name: 'pending_xmax', type: 'bigint', nullable: true })
  pendingXmax: string | null;

  /**
   * The previous release's lease on the batch above position (it embedded from the cursor), kept
   * while it may still run in a rolling deploy; unused since embedding_queue.
   */
  @Column({ name: 'leased_until', type: 'timestamptz', nullable: true })
  leasedUntil: Date | null;

  /** The previous release's leaseholder (see leasedUntil). */
  @Column({ name: 'lease_token', type: 'uuid', nullable: true })
  leaseToken: string | null;
}
