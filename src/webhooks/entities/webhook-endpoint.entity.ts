import {
  Check,
  Column,
  CreateDateColumn,
  Entity,
  ForeignKey,
  Index,
  PrimaryGeneratedColumn,
  UpdateDateColumn,
} from 'typeorm';

export type WebhookEndpointStatus = 'enabled' | 'disabled';
/** Why the service disabled an endpoint; null when enabled, or disabled by the organization. */
export type WebhookEndpointDisabledReason = 'failing';

/** Where an organization wants its events sent, and the secret they are signed with. */
@Entity('webhook_endpoints')
@Check('webhook_endpoints_status_check', `status IN ('enabled', 'disabled')`)
@Check('webhook_endpoints_disabled_reason_check', `disabled_reason IN ('failing')`)
@Index('webhook_endpoints_organization_idx', ['organizationId', 'createdAt', 'id'])
@Check(
  'webhook_endpoints_created_by_one',
  `created_by_user_id IS NULL OR created_by_api_key_id IS NULL`,
)
// The endpoints a user made, directly or through their keys: a takeback's (disableAtReset).
@Index('webhook_endpoints_created_by_user_idx', ['createdByUserId'], {
  where: 'created_by_user_id IS NOT NULL',
})
@Index('webhook_endpoints_created_by_api_key_idx', ['createdByApiKeyId'], {
  where: 'created_by_api_key_id IS NOT NULL',
})
export class WebhookEndpoint {
  @PrimaryGeneratedColumn('uuid')
  id: string;

  @Column({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'webhook_endpoints_organization_id_fkey',
  })
  organizationId: string;

  @Column({ type: 'text' })
  url: string;

  @Column({ type: 'text', nullable: true })
  description: string | null;

  /** The event types sent to this endpoint (`ping` is sent on request whatever this says). */
  @Column({ type: 'text', array: true })
  events: string[];

  @Column({ type: 'text', default: 'enabled' })
  status: WebhookEndpointStatus;

  /** `failing`: disabled by the service after WEBHOOK_DISABLE_AFTER_HOURS of failed attempts. */
  @Column({ name: 'disabled_reason', type: 'text', nullable: true })
  disabledReason: WebhookEndpointDisabledReason | null;

  /**
   * When the attempts to it began to fail: the first failure after its last success (or since it
   * was created or enabled), null while the last outcome was a success.
   */
  @Column({ name: 'failing_since', type: 'timestamptz', nullable: true })
  failingSince: Date | null;

  /**
   * `whsec_` + base64 of the HMAC key. Kept as is, not hashed: every delivery is signed with it
   * (as Stripe and Svix keep theirs). Never in a list, a get, an event or a log line.
   */
  @Column({ type: 'text' })
  secret: string;

  /**
   * The user whose access token made it or last changed its URL (null: a key did, or before
   * this was recorded).
   */
  @Column({ name: 'created_by_user_id', type: 'uuid', nullable: true })
  @ForeignKey('users', { onDelete: 'SET NULL', name: 'webhook_endpoints_created_by_user_id_fkey' })
  createdByUserId: string | null;

  /** The API key that made it or last changed its URL (null: a user did, or not recorded). */
  @Column({ name: 'created_by_api_key_id', type: 'uuid', nullable: true })
  @ForeignKey('api_keys', {
    onDelete: 'SET NULL',
    name: 'webhook_endpoints_created_by_api_key_id_fkey',
  })
  createdByApiKeyId: string | null;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
