import { Entity, PrimaryColumn } from 'typeorm';

/**
 * A lexeme of an organization whose postings may list fewer chunks than hold it, since a chunk
 * it listed was deleted: queued by the delete trigger of migration IndexKnowledgeTerms, taken by
 * KnowledgeTermRefillWorker, which lists its next best chunks.
 */
@Entity('knowledge_term_refills')
export class KnowledgeTermRefill {
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'knowledge_term_refills_pkey',
  })
  organizationId: string;

  @PrimaryColumn({
    type: 'text',
    collation: 'C',
    primaryKeyConstraintName: 'knowledge_term_refills_pkey',
  })
  lexeme: string;
}
