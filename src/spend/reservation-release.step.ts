import { sql, type Sql } from '../database/sql';

export interface HeldReservation {
  organizationId: string;
  /** The budgets they were made in (spend_reservations.budget). */
  budgets: string[];
  /**
   * The reply's estimate's; in a turn with tools, after its first call, the one holding the
   * tokens its model calls have spent so far with the estimate (SpendService.assertRoomFor).
   */
  reservationIds: string[];
  /** The reply's estimate: what stands for its next model call. */
  estimatedTokens: number;
}

/**
 * A WITH entry deleting the reply's reservations in the statement that adds its tokens: in every
 * snapshot the reply then counts once, reserved before, spent after, never both or neither. Its
 * text does not depend on the values, so a named statement can carry it.
 */
export function reservationReleaseStep(reservation: HeldReservation): Sql {
  return sql`spend_reservation_released AS (
      DELETE FROM spend_reservations
       WHERE organization_id = ${reservation.organizationId}::uuid
         AND budget = ANY(${reservation.budgets}::text[])
         AND reservation_id = ANY(${reservation.reservationIds}::uuid[]))`;
}
