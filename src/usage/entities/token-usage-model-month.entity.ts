import { Column, Entity, ForeignKey, PrimaryColumn } from 'typeorm';

/**
 * The model provider's reported token counts per organization, UTC month and model: the model
 * the service asked for on the route that wrote the reply (OPENAI_MODEL, a personality's own, or
 * a fallback's). A row exists only for models that wrote a reply.
 */
@Entity('token_usage_model_months')
export class TokenUsageModelMonth {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'token_usage_model_months_organization_id_fkey',
  })
  organizationId: string;

  /** The first day of the UTC month. */
  @PrimaryColumn({ type: 'date' })
  month: string;

  @PrimaryColumn({ type: 'text' })
  model: string;

  @Column({ type: 'bigint', default: 0 })
  requests: string;

  @Column({ name: 'prompt_tokens', type: 'bigint', default: 0 })
  promptTokens: string;

  @Column({ name: 'completion_tokens', type: 'bigint', default: 0 })
  completionTokens: string;

  @Column({ name: 'cached_tokens', type: 'bigint', default: 0 })
  cachedTokens: string;
}
