import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * The bytes of text an organization had chunked anew in a UTC day (KNOWLEDGE_DAILY_BYTES): each
 * is indexed and embedded, so replacing a document's content back and forth is bounded by this,
 * not by what the documents hold. Only the current day's row and the day before's are kept.
 */
@Entity('knowledge_daily_writes')
export class KnowledgeDailyWrite {
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'knowledge_daily_writes_pkey',
  })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'knowledge_daily_writes_organization_id_fkey',
  })
  organizationId: string;

  /** The UTC day. */
  @PrimaryColumn({ type: 'date', primaryKeyConstraintName: 'knowledge_daily_writes_pkey' })
  day: string;

  @Column({ type: 'bigint' })
  bytes: string;
}
