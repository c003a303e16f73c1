import { Check, Column, Entity, PrimaryColumn } from 'typeorm';

/**
 * Tokens a reply in flight holds back from a budget until its own are counted (contract §23,
 * §29; docs/spend-control.md): one row per (reply, budget), inserted by `spend_reserve()` under
 * the budget's lock and deleted by the reply's own statement, or when it failed. A row whose
 * instance died first counts until `expires_at`, then is purged.
 *
 * No foreign key to organizations: a row lives as long as one reply, and a key share lock on the
 * organization's row per reservation would serialise an organization's replies on it.
 */
@Entity('spend_reservations')
@Check('spend_reservations_tokens_check', `tokens > 0`)
export class SpendReservation {
  @PrimaryColumn({ name: 'organization_id', type: 'uuid' })
  organizationId: string;

  /** `month:<first day of the month>`, or `day:<day>:<end user's id>`. */
  @PrimaryColumn({ type: 'text' })
  budget: string;

  @PrimaryColumn({ name: 'reservation_id', type: 'uuid' })
  reservationId: string;

  /** The reply's estimate (prompt bytes + 512 + ENGINE_MAX_TOKENS). */
  @Column({ type: 'integer' })
  tokens: number;

  /** ENGINE_TIMEOUT_MS + 60 s after it was made, on the service's clock (SpendService). */
  @Column({ name: 'expires_at', type: 'timestamptz' })
  expiresAt: Date;
}
