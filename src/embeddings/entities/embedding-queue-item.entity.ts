import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * A row of a source (a memory, a knowledge chunk) waiting for its embedding by one model: put here
 * by the EmbeddingWorker as its cursor passes the row, and taken away once the row is embedded or
 * passed over. Batches are drawn from it organization by organization, in turn, so one tenant's
 * import of thousands waits behind nobody's single memory (review, 2026-12-05), and each batch is
 * leased row by row (`claim_token` until `claimed_until`) while its provider call runs, so
 * instances embed different batches side by side. No foreign key: a row deleted meanwhile (an
 * erasure) is found gone when its batch is drawn, and its item dropped; a key would have the
 * worker's inserts wait on such a deletion.
 */
@Entity('embedding_queue')
export class EmbeddingQueueItem {
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'embedding_queue_pkey' })
  source: string;

  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'embedding_queue_pkey' })
  model: string;

  /**
   * The row's organization: whose turn the item waits for. In the key before the row's id, so
   * that the key's one index serves the organizations' scan and each one's line, oldest first.
   */
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'embedding_queue_pkey',
  })
  organizationId: string;

  /** The row's id in its source. */
  @PrimaryColumn({
    name: 'row_id',
    type: 'bigint',
    primaryKeyConstraintName: 'embedding_queue_pkey',
  })
  rowId: string;

  /** Until when the holder of claim_token embeds the item; null: waiting for a batch. */
  @Column({ name: 'claimed_until', type: 'timestamptz', nullable: true })
  claimedUntil: Date | null;

  /** The batch's claim: only its holder may store the item's embedding while the lease is live. */
  @Column({ name: 'claim_token', type: 'uuid', nullable: true })
  claimToken: string | null;

  /**
   * How often its text failed alone at the provider (a 5xx, a timeout) while the provider
   * embedded others: it then waits on its own until `claimed_until`, with no claim, and is passed
   * over after EmbeddingWorker's DEFERRALS_MAX.
   */
  @Column({ type: 'smallint', default: 0 })
  attempts: number;
}
