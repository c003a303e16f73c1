import { Column, CreateDateColumn, Entity, PrimaryGeneratedColumn } from 'typeorm';

export type MemoryRole = 'user' | 'personality';

/** One message of a conversation between an end user and a personality, in order (by id). */
@Entity('memories')
export class Memory {
  @PrimaryGeneratedColumn('identity', { type: 'bigint', generatedIdentity: 'ALWAYS' })
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  @Column({ name: 'end_user_id', type: 'uuid' })
  endUserId: string;

  @Column({ name: 'personality_id', type: 'uuid' })
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
}
