import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** The model provider's reported token counts, per organization and UTC month. */
@Entity('token_usage_months')
export class TokenUsageMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @Column({ type: 'bigint', default: 0 })
  requests: string;

  @Column({ name: 'prompt_tokens', type: 'bigint', default: 0 })
  promptTokens: string;

  @Column({ name: 'completion_tokens', type: 'bigint', default: 0 })
  completionTokens: string;

  /** Prompt tokens the provider served from its prompt cache (a part of prompt_tokens). */
  @Column({ name: 'cached_tokens', type: 'bigint', default: 0 })
  cachedTokens: string;
}
