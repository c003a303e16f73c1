import { Check, Column, Entity, Index, PrimaryColumn } from 'typeorm';

export type IdempotencyScopeType = 'organization' | 'user';

/**
 * One `Idempotency-Key` of one organization (or of one user, on user-only endpoints), kept 24
 * hours (docs/idempotency.md). While the first request runs, `response_status` is null and
 * `locked_by`/`locked_until` hold its lease; once it answered, the stored status and body (secrets
 * nulled) are what every retry gets. Written and read with raw SQL (IdempotencyRepository); the
 * entity documents the table for TypeORM and the migration-drift check.
 */
@Entity('idempotency_keys')
@Check('idempotency_keys_scope_type_check', `scope_type IN ('organization', 'user')`)
@Check(
  'idempotency_keys_state_check',
  `(response_status IS NULL) = (locked_by IS NOT NULL AND locked_until IS NOT NULL)`,
)
@Index('idempotency_keys_created_at_idx', ['createdAt'])
@Index('idempotency_keys_subject_idx', ['scopeId', 'subject'], { where: 'subject IS NOT NULL' })
@Index('idempotency_keys_personality_idx', ['scopeId', 'personalityId'], {
  where: 'personality_id IS NOT NULL',
})
export class IdempotencyKey {
  @PrimaryColumn({
    name: 'scope_type',
    type: 'text',
    primaryKeyConstraintName: 'idempotency_keys_pkey',
  })
  scopeType: IdempotencyScopeType;

  /** The organization's id, or the user's on user-only endpoints; no foreign key: rows expire. */
  @PrimaryColumn({
    name: 'scope_id',
    type: 'uuid',
    primaryKeyConstraintName: 'idempotency_keys_pkey',
  })
  scopeId: string;

  @PrimaryColumn({ name: 'key', type: 'text', primaryKeyConstraintName: 'idempotency_keys_pkey' })
  key: string;

  /** SHA-256 of the method, the path and the canonical JSON body of the first request. */
  @Column({ name: 'request_hash', type: 'bytea' })
  requestHash: Buffer;

  /** Null while the first request runs. */
  @Column({ name: 'response_status', type: 'smallint', nullable: true })
  responseStatus: number | null;

  /** The JSON text answered (secrets nulled); null for an empty body or while running. */
  @Column({ name: 'response_body', type: 'text', nullable: true })
  responseBody: string | null;

  /**
   * For an answer that carries an end user's data (end-user-answers.ts): SHA-256 of their
   * `user_id`, so that their erasure, or a memory's deletion, deletes the answer with them.
   */
  @Column({ type: 'bytea', nullable: true })
  subject: Buffer | null;

  /**
   * For a reply (`POST /v1/respond`, a resumed turn): the personality it speaks as, written at the
   * claim, so that the personality's deletion forgets the answer with its conversations. Not a
   * foreign key: the claim's is the request's before validation, and keys outlive personalities.
   */
  @Column({ name: 'personality_id', type: 'uuid', nullable: true })
  personalityId: string | null;

  /**
   * One of the end user's memories or facts was deleted while the request ran: its answer, which
   * may hold it, is not kept (the key is deleted when the request ends, and a retry runs afresh).
   */
  @Column({ name: 'answer_forgotten', type: 'boolean', default: false })
  answerForgotten: boolean;

  /** The request id of the request holding the lease (the one running). */
  @Column({ name: 'locked_by', type: 'text', nullable: true })
  lockedBy: string | null;

  /** The lease: renewed while the request runs; past it, a retry may take the key over. */
  @Column({ name: 'locked_until', type: 'timestamptz', nullable: true })
  lockedUntil: Date | null;

  @Column({ name: 'created_at', type: 'timestamptz', default: () => 'now()' })
  createdAt: Date;

  @Column({ name: 'completed_at', type: 'timestamptz', nullable: true })
  completedAt: Date | null;
}
