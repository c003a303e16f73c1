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

/** Where an organization wants its events sent, and the secret they are signed with. */
@Entity('webhook_endpoints')
@Check('webhook_endpoints_status_check', `status IN ('enabled', 'disabled')`)
@Index('webhook_endpoints_organization_idx', ['organizationId', 'createdAt', 'id'])
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

  /**
   * `whsec_` + base64 of the HMAC key. Kept as is, not hashed: every delivery is signed with it
   * (as Stripe and Svix keep theirs). Never in a list, a get, an event or a log line.
   */
  @Column({ type: 'text' })
  secret: string;

  @CreateDateColumn({ name: 'created_at', type: 'timestamptz' })
  createdAt: Date;

  @UpdateDateColumn({ name: 'updated_at', type: 'timestamptz' })
  updatedAt: Date;
}
