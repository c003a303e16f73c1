import { Column, Entity, ForeignKey, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * One audited change, written in the transaction of the change itself. Actor and target are kept
 * as plain ids, never foreign keys: the trail must outlive the users, keys and members it names.
 */
@Entity('audit_events')
@Index('audit_events_organization_idx', ['organizationId', 'createdAt', 'id'])
@Index('audit_events_created_at_idx', ['createdAt'])
// One action's events, in the page's order: GET /v1/audit-events?action= (migration
// IndexAuditEventsByAction).
@Index('audit_events_organization_action_idx', ['organizationId', 'action', 'createdAt', 'id'])
// The events about one end user, in /model's order: subject access and the erasure's redaction.
@Index('audit_events_end_user_target_idx', ['organizationId', 'targetId', 'createdAt', 'id'], {
  where: `"target_type" = 'end_user'`,
})
export class AuditEvent {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'audit_events_organization_id_fkey' })
  organizationId: string;

  @Column({ type: 'text' })
  action: string;

  @Column({ name: 'actor_type', type: 'text' })
  actorType: string;

  @Column({ name: 'actor_id', type: 'text' })
  actorId: string;

  @Column({ name: 'target_type', type: 'text' })
  targetType: string;

  @Column({ name: 'target_id', type: 'text' })
  targetId: string;

  @Column({ type: 'text', nullable: true })
  ip: string | null;

  @Column({ name: 'request_id', type: 'text', nullable: true })
  requestId: string | null;

  @Column({ type: 'jsonb' })
  details: Record<string, unknown>;

  /**
   * The Clock's time of the change, written by the service (no default), so a spec's clock dates
   * the events it lists and the retention purges. Events of the same millisecond list by id.
   */
  @Column({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
