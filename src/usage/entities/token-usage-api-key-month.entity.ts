import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * Replies made with a user's access token (the console's, a script's signed-in user): they have
 * no API key, and a primary key column cannot be null, so they count under this id. The API
 * shows it as `key: null`.
 */
export const SIGNED_IN_USERS_KEY_ID = '00000000-0000-0000-0000-000000000000';

/**
 * The provider's reported token counts per API key and UTC month: the `api_key` breakdown (the
 * key that made each reply). No foreign key to the key: a revoked or deleted key's tokens stay
 * counted, as a deleted personality's do.
 */
@Entity('token_usage_api_key_months')
@Index('token_usage_api_key_months_total_idx', [
  'organizationId',
  'month',
  'totalTokens',
  'apiKeyId',
])
export class TokenUsageApiKeyMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_api_key_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  /** The key that made the replies; SIGNED_IN_USERS_KEY_ID for replies made with a user token. */
  @PrimaryColumn({ name: 'api_key_id', type: 'uuid' })
  apiKeyId: string;

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
