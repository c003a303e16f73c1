import {
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';
import type { ToolDefinition } from '../../tools/tool-definitions';
import type { PersonalityReplies, PersonalityVoice } from './personality-definition';

/** An organization's own copy of a catalog entry; nothing in it refers back to the catalog row. */
@Entity('personalities')
@Index('personalities_organization_idx', ['organizationId', 'createdAt', 'id'])
export class Personality {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', { onDelete: 'CASCADE', name: 'personalities_organization_id_fkey' })
  organizationId: string;

  @Column({ name: 'source_slug', type: 'text' })
  sourceSlug: string;

  @Column({ name: 'source_version', type: 'text' })
  sourceVersion: string;

  @Column({ type: 'text' })
  name: string;

  @Column({ type: 'text' })
  description: string;

  @Column({ type: 'jsonb' })
  traits: string[];

  @Column({ type: 'jsonb' })
  voice: PersonalityVoice;

  @Column({ name: 'system_prompt', type: 'text' })
  systemPrompt: string;

  @Column({ type: 'jsonb' })
  replies: PersonalityReplies;

  /** A BCP 47 primary language subtag (languages.ts): the language its memories are indexed in. */
  @Column({ type: 'text', default: 'en' })
  language: string;

  /** The text search configuration of `language` (searchConfigOf), kept with it. */
  @Column({ name: 'search_config', type: 'text', default: 'english' })
  searchConfig: string;

  /** The model the OpenAI-compatible engine asks for; null: OPENAI_MODEL. */
  @Column({ type: 'text', nullable: true })
  model: string | null;

  /** The tools its model may call (contract §26), as validated by toolProblems. */
  @Column({ type: 'jsonb', default: () => "'[]'" })
  tools: ToolDefinition[];

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
