import { Check, Column, CreateDateColumn, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';
import type { ToolTurnState } from '../tool-turn-state';

export type ToolTurnStatus = 'pending' | 'resumed' | 'completed';

/**
 * A turn paused for client tools (contract §26): kept here, not in an instance's memory, so any
 * instance resumes it and pending turns cost no process memory. Resumed once: the claim is a
 * conditional UPDATE of `status`; `completed` (its state emptied) with the exchange it stored.
 */
@Entity('tool_turns')
@Check('tool_turns_status_check', `status IN ('pending', 'resumed', 'completed')`)
@Index('tool_turns_expires_idx', ['expiresAt'])
@Index('tool_turns_end_user_idx', ['endUserId'])
@Index('tool_turns_personality_idx', ['personalityId'])
// An organization's pending turns by their last pause: a new pause ends those past its cap.
@Index('tool_turns_pending_idx', ['organizationId', 'expiresAt', 'id'], {
  where: `status = 'pending'`,
})
export class ToolTurn {
  /** `turn_` + ULID. */
  @PrimaryColumn({ type: 'text', primaryKeyConstraintName: 'tool_turns_pkey' })
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'tool_turns_organization_id_fkey' })
  organizationId: string;

  @Column({ name: 'end_user_id', type: 'uuid' })
  @ForeignKey('end_users', { onDelete: 'CASCADE', name: 'tool_turns_end_user_id_fkey' })
  endUserId: string;

  @Column({ name: 'personality_id', type: 'uuid' })
  @ForeignKey('personalities', { onDelete: 'CASCADE', name: 'tool_turns_personality_id_fkey' })
  personalityId: string;

  @Column({ type: 'text', default: 'pending' })
  status: ToolTurnStatus;

  /**
   * The message, the calls made so far with their outputs, and the calls awaited; null once the
   * turn completed (they are in its memories then).
   */
  @Column({ type: 'jsonb', nullable: true })
  state: ToolTurnState | null;

  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;
}
