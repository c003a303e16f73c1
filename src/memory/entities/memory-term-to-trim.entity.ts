import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';

/**
 * A word of an end user whose postings ran past their 64 (docs/memory.md, "The postings"):
 * written by the trigger memories_index_terms when another statement trimmed or held the
 * postings it picked, taken and trimmed by PostingsTrimWorker (memory_terms_trim_words, migration
 * TrimPostingsInTheBackground). No unique key: a reply never waits on another's insert; the
 * trigger skips a word already waiting, and the function trims each word once a batch.
 */
@Entity('memory_terms_to_trim')
@Index('memory_terms_to_trim_word_idx', ['endUserId', 'lexeme'])
export class MemoryTermToTrim {
  @PrimaryGeneratedColumn('identity', {
    type: 'bigint',
    generatedIdentity: 'ALWAYS',
    primaryKeyConstraintName: 'memory_terms_to_trim_pkey',
  })
  id: string;

  @Column({ name: 'end_user_id', type: 'uuid' })
  endUserId: string;

  @Column({ type: 'text', collation: 'C' })
  lexeme: string;
}
