import { Column, Entity, ForeignKey, Index, PrimaryColumn } from 'typeorm';

/**
 * An organization's provider tokens (prompt + completion) per UTC hour, kept while
 * STRIPE_TOKEN_METER_EVENT_NAME is set: the reply's statement adds to the hour it is stored in,
 * and once the hour is over (and a grace for replies still committing) the worker turns the row
 * into one meter event and marks it sealed. Tokens a reply adds after that (an instance whose
 * clock is behind) go to late_tokens, which the worker sends as an event of their own.
 */
@Entity('meter_token_hours')
@Index('meter_token_hours_open_idx', ['hour'], { where: 'NOT sealed' })
@Index('meter_token_hours_late_idx', ['hour'], { where: 'late_tokens > 0' })
export class MeterTokenHour {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  @ForeignKey('organizations', {
    onDelete: 'CASCADE',
    name: 'meter_token_hours_organization_id_fkey',
  })
  organizationId: string;

  /** The hour's first instant (UTC). */
  @PrimaryColumn({ type: 'timestamptz' })
  hour: Date;

  @Column({ type: 'bigint', default: 0 })
  tokens: string;

  @Column({ type: 'boolean', default: false })
  sealed: boolean;

  /** Tokens added once the hour was sealed, not sent yet. */
  @Column({ name: 'late_tokens', type: 'bigint', default: 0 })
  lateTokens: string;

  /** Events of late tokens sent for the hour: the next one's identifier counts on from it. */
  @Column({ name: 'late_sends', type: 'integer', default: 0 })
  lateSends: number;
}
