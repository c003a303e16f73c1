import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  JoinColumn,
  ManyToOne,
  PrimaryGeneratedColumn,
} from 'typeorm';
import type { ToolCallRecord } from '../../tools/tool-turn-state';
import { EndUser } from '../../end-users/entities/end-user.entity';
import type { MemorySafety } from '../../safety/safety-categories';

export type MemoryRole = 'user' | 'personality';

/** One message of a conversation between an end user and a personality, in order (by id). */
@Entity('memories')
@Check('memories_role_check', `role IN ('user', 'personality')`)
@Index('memories_end_user_idx', ['endUserId', 'id'])
@Index('memories_conversation_idx', ['endUserId', 'personalityId', 'id'])
@Index('memories_personality_idx', ['personalityId'])
@Index('memories_organization_created_idx', ['organizationId', 'createdAt'])
export class Memory {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @Column({ name: 'end_user_id', type: 'uuid' })
  endUserId: string;

  @Column({ name: 'personality_id', type: 'uuid' })
  @ForeignKey('personalities', { onDelete: 'CASCADE', name: 'memories_personality_id_fkey' })
  personalityId: string;

  @Column({ type: 'text' })
  role: MemoryRole;

  @Column({ type: 'text' })
  content: string;

  /** The emotion detected in (user) or expressed by (personality) the message. */
  @Column({ type: 'text', nullable: true })
  emotion: string | null;

  @Column({ type: 'real', nullable: true })
  intensity: number | null;

  @Column({ name: 'vocabulary_version', type: 'text', nullable: true })
  vocabularyVersion: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  /**
   * The safety verdict of the message (user) or the reply (personality) when it was written:
   * `{flagged, categories, action}` (docs/safety.md); null for memories written before safety.
   */
  @Column({ type: 'jsonb', nullable: true })
  safety: MemorySafety | null;

  /** A reply's tool calls, in the order they were made (contract §26); null: it called none. */
  @Column({ name: 'tool_calls', type: 'jsonb', nullable: true })
  toolCalls: ToolCallRecord[] | null;

  /**
   * The content's lexemes in its personality's language (search_config) when it was written;
   * a trigger copies them into memory_terms, which retrieval reads (migration IndexMemoryTerms).
   */
  @Column({ type: 'tsvector', select: false, default: () => "''" })
  search: string;

  @ManyToOne(() => EndUser, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'end_user_id', foreignKeyConstraintName: 'memories_end_user_id_fkey' })
  endUser?: EndUser;
}
