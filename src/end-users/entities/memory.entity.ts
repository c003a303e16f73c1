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
import { EndUser } from './end-user.entity';

export type MemoryRole = 'user' | 'personality';

/** One message of a conversation between an end user and a personality, in order (by id). */
@Entity('memories')
@Check('memories_role_check', `role IN ('user', 'personality')`)
@Index('memories_end_user_idx', ['endUserId', 'id'])
@Index('memories_conversation_idx', ['endUserId', 'personalityId', 'id'])
@Index('memories_personality_idx', ['personalityId'])
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

  @ManyToOne(() => EndUser, { onDelete: 'CASCADE' })
  @JoinColumn({ name: 'end_user_id', foreignKeyConstraintName: 'memories_end_user_id_fkey' })
  endUser?: EndUser;
}
