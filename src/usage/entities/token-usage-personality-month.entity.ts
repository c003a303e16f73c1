import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * The provider's reported token counts per personality and UTC month: the `personality`
 * breakdown. No foreign key to the personality: a deleted personality's tokens stay counted.
 */
@Entity('token_usage_personality_months')
@Index('token_usage_personality_months_total_idx', [
  'organizationId',
  'month',
  'totalTokens',
  'personalityId',
])
export class TokenUsagePersonalityMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_personality_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @PrimaryColumn({ name: 'personality_id', type: 'uuid' })
  personalityId: string;

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
