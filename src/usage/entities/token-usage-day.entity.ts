import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/** The provider's reported token counts per organization and UTC day: the `day` breakdown. */
@Entity('token_usage_days')
export class TokenUsageDay {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_days_organization_id_fkey',
  })
  organizationId: string;

  @PrimaryColumn({ type: 'date' })
  day: string;

  @Column({ type: 'bigint', default: 0 })
  requests: string;

  @Column({ name: 'prompt_tokens', type: 'bigint', default: 0 })
  promptTokens: string;

  @Column({ name: 'completion_tokens', type: 'bigint', default: 0 })
  completionTokens: string;

  @Column({ name: 'cached_tokens', type: 'bigint', default: 0 })
  cachedTokens: string;
}
