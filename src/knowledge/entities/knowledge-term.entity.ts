import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One lexeme of one knowledge chunk, listed under its organization with the lexeme's weight in
 * the chunk: the postings retrieval reads instead of the chunks' index, so that its cost does not
 * grow with what an organization holds (docs/knowledge.md#search). Each (organization, lexeme)
 * keeps its KNOWLEDGE_POSTINGS_PER_WORD best-weighted chunks. Written only by the triggers of
 * migration IndexKnowledgeTerms (every chunk inserted; on a delete, the next best refill what
 * went), which also delete a chunk's postings with it: there is no foreign key, whose check per
 * posting cost more than the rest of an upload's postings together.
 */
@Entity('knowledge_terms')
export class KnowledgeTerm {
  @PrimaryColumn({
    name: 'organization_id',
    type: 'uuid',
    primaryKeyConstraintName: 'knowledge_terms_pkey',
  })
  organizationId: string;

  /** Compared byte by byte ("C"): a lexeme is looked up by equality only, never sorted for people. */
  @PrimaryColumn({ type: 'text', collation: 'C', primaryKeyConstraintName: 'knowledge_terms_pkey' })
  lexeme: string;

  /**
   * The lexeme's BM25 term weight in the chunk (SQL function knowledge_term_weight): in the key,
   * so that a lexeme's best chunks are the first its index range gives, read backwards.
   */
  @PrimaryColumn({ type: 'real', primaryKeyConstraintName: 'knowledge_terms_pkey' })
  weight: number;

  @PrimaryColumn({
    name: 'chunk_id',
    type: 'bigint',
    primaryKeyConstraintName: 'knowledge_terms_pkey',
  })
  chunkId: string;

  /** The chunk's, copied: retrieval keeps the personality's documents without reading chunks. */
  @Column({ name: 'document_id', type: 'uuid' })
  documentId: string;
}
