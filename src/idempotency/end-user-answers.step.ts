import { raw, type Sql, sql } from '../database/sql';
import { endUserSubject, NO_REQUEST_HOLDS_IT } from './end-user-answers';

/** What a statement deleted of an end user's data, as SQL over its own WITH entries. */
export interface DeletedData {
  /** True when it deleted (or changed) something. */
  found: Sql;
  /** The newest creation time among what it deleted (NULL when nothing). */
  newestCreatedAt: Sql;
}

/**
 * Two WITH entries for the statement that deletes an end user's data (a memory, a fact, a fact's
 * old content), taking with it what the idempotency store holds of that data:
 * - `name` deletes the organization's stored answers about these end users;
 * - `name_running` detaches the claims of requests still running that began before the deleted
 *   data was created, so may be what created it: the claim stays in progress (a retry meanwhile
 *   gets 409, and the request does not run twice while it runs), but no request holds it any
 *   more, so that request's answer, which may hold the deleted data, is not kept when it ends
 *   (found by review: a keyed fact creation answered between its commit and its stored answer
 *   replayed the deleted fact for 24 hours). A claim begun after the data existed is left alone:
 *   a margin for the clock would take the replay from a retry of the next request too. Both
 *   times are the one instance's clock, the claim's read first.
 */
export function forgetEndUserAnswersStep(
  name: string,
  organizationId: string,
  userIds: readonly string[],
  deleted: DeletedData,
): Sql {
  const aboutThem = sql`scope_type = 'organization' AND scope_id = ${organizationId}::uuid
         AND subject = ANY (${userIds.map(endUserSubject)}::bytea[])`;
  return sql`${raw(name)} AS (
      DELETE FROM idempotency_keys
       WHERE ${aboutThem} AND response_status IS NOT NULL AND ${deleted.found}),
    ${raw(`${name}_running`)} AS (
      UPDATE idempotency_keys SET locked_by = ${NO_REQUEST_HOLDS_IT}
       WHERE ${aboutThem} AND response_status IS NULL
         AND created_at <= ${deleted.newestCreatedAt})`;
}
