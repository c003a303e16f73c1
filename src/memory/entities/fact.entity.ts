import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  Unique,
  UpdateDateColumn,
} from 'typeorm';

export const FACT_SOURCES = ['api', 'engine'] as const;
export type FactSource = (typeof FACT_SOURCES)[number];

/**
 * A durable fact about an end user, shared by every personality of the organization: written by
 * the business (`api`) or learned by the engine from a message (`engine`, with that message's
 * memory). `content_key` is the content with case and whitespace folded: one fact per key.
 */
@Entity('end_user_facts')
@Unique('end_user_facts_content_unique', ['endUserId', 'contentKey'])
@Check('end_user_facts_source_check', `source IN ('api', 'engine')`)
@Index('end_user_facts_newest_idx', ['endUserId', 'createdAt', 'id'])
@Index('end_user_facts_memory_idx', ['memoryId'], { where: 'memory_id IS NOT NULL' })
export class Fact {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'end_user_facts_organization_id_fkey' })
  organizationId: string;

  @Column({ name: 'end_user_id', type: 'uuid' })
  @ForeignKey('end_users', { onDelete: 'CASCADE', name: 'end_user_facts_end_user_id_fkey' })
  endUserId: string;

  @Column({ type: 'text' })
  content: string;

  @Column({ name: 'content_key', type: 'text' })
  contentKey: string;

  @Column({ type: 'text' })
  source: FactSource;

  /** The message it was learned from; null for the API's facts, or once that memory is purged. */
  @Column({ name: 'memory_id', type: 'bigint', nullable: true })
  @ForeignKey('memories', { onDelete: 'SET NULL', name: 'end_user_facts_memory_id_fkey' })
  memoryId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
