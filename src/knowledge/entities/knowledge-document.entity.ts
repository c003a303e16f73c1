import {
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

/**
 * A document of the business (docs/knowledge.md): its text as uploaded (HTML reduced to text),
 * split into knowledge_chunks. `all_personalities`: attached to every personality of the
 * organization, now and later; else to those of knowledge_attachments.
 */
@Entity('knowledge_documents')
@Index('knowledge_documents_list_idx', ['organizationId', 'createdAt', 'id'])
export class KnowledgeDocument {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'knowledge_documents_organization_id_fkey',
  })
  organizationId: string;

  @Column({ type: 'text' })
  title: string;

  @Column({ type: 'text' })
  language: string;

  /** The full-text search configuration of the language (languages.ts), its chunks' too. */
  @Column({ name: 'search_config', type: 'text' })
  searchConfig: string;

  @Column({ type: 'text' })
  content: string;

  /** The content's size in UTF-8: what counts toward KNOWLEDGE_MAX_BYTES. */
  @Column({ type: 'integer' })
  bytes: number;

  @Column({ type: 'integer' })
  chunks: number;

  @Column({ name: 'all_personalities', type: 'boolean' })
  allPersonalities: boolean;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
