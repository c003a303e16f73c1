import { randomUUID } from 'node:crypto';
import { type Cte, cte, sql } from '../database/sql';
import { isoTime } from '../database/iso-time';

export interface NewEndUser {
  organizationId: string;
  userId: string;
  metadataJson: string;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A user_id no client can send (a user_id holds no control character): an imported end user's
 * while its import runs. Named only by the import's last statement (endUserNamingStep), the row
 * holds no one's user_id meanwhile, so a request for that user_id (a reply, a
 * `POST /v1/end-users`) never waits behind the import's long transaction, as it would on the
 * unique key of an uncommitted insert.
 */
export function unnamedUserId(): string {
  return `\u0001import ${randomUUID()}`;
}

/** A CTE inserting an import's end user under unnamedUserId(); its row is the new id. */
export function unnamedEndUserInsertStep(endUser: NewEndUser): Cte<'id'> {
  return cte(
    'new_end_user',
    { id: sql`id` },
    (lent) => sql`
      INSERT INTO end_users (organization_id, user_id, metadata, created_at, updated_at)
      VALUES (${endUser.organizationId}, ${unnamedUserId()}, ${endUser.metadataJson}::jsonb,
              ${endUser.createdAt}::timestamptz, ${endUser.updatedAt}::timestamptz)
      RETURNING ${lent}`,
  );
}

/**
 * A CTE giving the end user `id` its user_id, with `webhook_data` for the `end_user.created`
 * event of the same statement. The unique constraint on (organization, user_id) decides: a
 * user_id taken meanwhile fails the statement (unique violation), and of concurrent imports of
 * one user_id the first to commit keeps it.
 */
export function endUserNamingStep(id: string, userId: string): Cte<'id' | 'webhook_data'> {
  return cte(
    'named_end_user',
    {
      id: sql`id`,
      webhook_data: sql`jsonb_build_object('user_id', user_id, 'created_at', ${isoTime('created_at')})`,
    },
    (lent) => sql`
      UPDATE end_users SET user_id = ${userId} WHERE id = ${id}
      RETURNING ${lent}`,
  );
}
