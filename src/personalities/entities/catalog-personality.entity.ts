import { Column, CreateDateColumn, Entity, PrimaryColumn, UpdateDateColumn } from 'typeorm';
import type { PersonalityReplies, PersonalityVoice } from './personality-definition';

/** An entry of the global catalog, managed by operators (CLI import), addressed by slug. */
@Entity('catalog_personalities')
export class CatalogPersonality {
  @PrimaryColumn({ type: 'text' })
  slug: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  description: string;

  @Column({ type: 'text' })
  version: string;

  @Column({ type: 'jsonb' })
  traits: string[];

  @Column({ type: 'jsonb' })
  voice: PersonalityVoice;

  @Column({ name: 'system_prompt', type: 'text' })
  systemPrompt: string;

  @Column({ type: 'jsonb' })
  replies: PersonalityReplies;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
