import { raw, type Sql, sql } from '../database/sql';
import { endUserSubject } from './end-user-answers';

/**
 * A WITH entry (`name AS (DELETE …)`) deleting the organization's stored answers about these
 * end users, for the statement that deletes their data (a memory's deletion); `when` limits it
 * to when that statement found something to delete. Only answers: a key whose request still runs
 * stays claimed, or a retry meanwhile would run that request a second time (found by review).
 */
export function forgetEndUserAnswersStep(
  name: string,
  organizationId: string,
  userIds: readonly string[],
  when?: Sql,
): Sql {
  return sql`${raw(name)} AS (
      DELETE FROM idempotency_keys
       WHERE scope_type = 'organization' AND scope_id = ${organizationId}::uuid
         AND subject = ANY (${userIds.map(endUserSubject)}::bytea[])
         AND response_status IS NOT NULL
         ${when ? sql`AND ${when}` : sql``})`;
}
