import { type Cte, cte, sql } from '../database/sql';

export interface NewEndUser {
  organizationId: string;
  userId: string;
  metadataJson: string;
  createdAt: Date;
  updatedAt: Date;
}

/**
 * A CTE inserting an end user that must not exist yet (an import): `ON CONFLICT DO NOTHING` on
 * the (organization, user_id) unique constraint, so of concurrent statements for one user_id
 * exactly one inserts (the others wait for its transaction, then answer no row) and no check
 * before the insert can be outrun. Its row is the new end user's id, with `webhook_data` for the
 * `end_user.created` event of the same statement; no row: the user_id was taken.
 */
export function endUserInsertStep(endUser: NewEndUser): Cte<'id' | 'webhook_data'> {
  return cte(
    'new_end_user',
    {
      id: sql`id`,
      webhook_data: sql`jsonb_build_object('user_id', user_id, 'created_at', created_at)`,
    },
    (lent) => sql`
      INSERT INTO end_users (organization_id, user_id, metadata, created_at, updated_at)
      VALUES (${endUser.organizationId}, ${endUser.userId}, ${endUser.metadataJson}::jsonb,
              ${endUser.createdAt}::timestamptz, ${endUser.updatedAt}::timestamptz)
      ON CONFLICT (organization_id, user_id) DO NOTHING
      RETURNING ${lent}`,
  );
}
