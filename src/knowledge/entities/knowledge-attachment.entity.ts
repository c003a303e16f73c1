import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/** A document attached to one personality (a document not attached to all of them). */
@Entity('knowledge_attachments')
@Index('knowledge_attachments_personality_idx', ['personalityId'])
export class KnowledgeAttachment {
  @PrimaryColumn({ name: 'document_id', type: 'uuid' })
  @ForeignKey('knowledge_documents', {
    onDelete: 'CASCADE',
    name: 'knowledge_attachments_document_id_fkey',
  })
  documentId: string;

  /** Deleting the personality deletes the attachment, never the document. */
  @PrimaryColumn({ name: 'personality_id', type: 'uuid' })
  @ForeignKey('personalities', {
    onDelete: 'CASCADE',
    name: 'knowledge_attachments_personality_id_fkey',
  })
  personalityId: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  organizationId: string;
}
