import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * The provider's reported token counts per end user and UTC month: the `end_user` breakdown,
 * read most tokens first through the index on (organization, month, total_tokens, end user)
 * with keyset paging. Erasing the end user deletes its rows (the organization's own counts, by
 * day, personality and model, keep the tokens); subject access lists them.
 */
@Entity('token_usage_end_user_months')
@Index('token_usage_end_user_months_total_idx', [
  'organizationId',
  'month',
  'totalTokens',
  'endUserId',
])
// An end user's months: subject access reads them, the erasure's cascade deletes them.
@Index('token_usage_end_user_months_end_user_idx', ['endUserId', 'month'])
export class TokenUsageEndUserMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_end_user_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @PrimaryColumn({ name: 'end_user_id', type: 'uuid' })
  @ForeignKey('end_users', {
    onDelete: 'CASCADE',
    name: 'token_usage_end_user_months_end_user_id_fkey',
  })
  endUserId: string;

  @Column({ type: 'bigint', default: 0 })
  requests: string;

  @Column({ name: 'prompt_tokens', type: 'bigint', default: 0 })
  promptTokens: string;

  @Column({ name: 'completion_tokens', type: 'bigint', default: 0 })
  completionTokens: string;

  @Column({ name: 'cached_tokens', type: 'bigint', default: 0 })
  cachedTokens: string;

  /** prompt_tokens + completion_tokens: the breakdown's order. */
  @Column({ name: 'total_tokens', type: 'bigint', default: 0 })
  totalTokens: string;
}
