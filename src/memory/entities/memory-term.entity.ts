import { Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * One lexeme of one memory, listed under its end user: the index recall and search read instead
 * of the memories themselves, so that their cost does not grow with what an end user holds
 * (docs/memory.md, "What recall costs"). Written only by the trigger memories_index_terms (in the
 * migration), from the memory's `search` lexemes, on every insert; deleted with the memory by the
 * trigger memories_forget_terms (migration PostingsGoWithTheirMemory), not a foreign key. The
 * primary key's index also carries the memory's personality and length (INCLUDE, migration
 * PostingsCarryPersonalityAndLength, which TypeORM cannot declare): ranking reads no memory.
 */
@Entity('memory_terms')
export class MemoryTerm {
  @PrimaryColumn({
    name: 'end_user_id',
    type: 'uuid',
    primaryKeyConstraintName: 'memory_terms_pkey',
  })
  endUserId: string;

  /** Compared byte by byte ("C"): a lexeme is looked up by equality only, never sorted for people. */
  @PrimaryColumn({ type: 'text', collation: 'C', primaryKeyConstraintName: 'memory_terms_pkey' })
  lexeme: string;

  @PrimaryColumn({
    name: 'memory_id',
    type: 'bigint',
    primaryKeyConstraintName: 'memory_terms_pkey',
  })
  memoryId: string;

  /** The memory's personality: its language, and whether a reply with one personality recalls it. */
  @Column({ name: 'personality_id', type: 'uuid' })
  personalityId: string;

  /** The memory's length in lexemes (`length(search)`), for BM25's length normalisation. */
  @Column({ name: 'memory_length', type: 'integer' })
  memoryLength: number;
}
