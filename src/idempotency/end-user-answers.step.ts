import { raw, type Sql, sql } from '../database/sql';
import { endUserSubject } from './end-user-answers';

/**
 * WITH entries for the statement that deletes data stored answers may hold, taking from the
 * idempotency store the answers of the organization's keys `about` selects (`k` is the key);
 * `when` limits them to when that statement found something to delete:
 * - the stored answers are deleted (`name_deleted`);
 * - the keys whose request still runs are marked (`answer_forgotten`, `name_running`): the
 *   request keeps its claim and renews its lease (a retry meanwhile gets 409 and the request
 *   never runs twice, found by review), but its answer, which may hold the deleted data (it may
 *   be what created it), is not kept when it ends.
 *
 * `name` reads the keys FOR UPDATE, in key order: a request storing its answer between this
 * statement's snapshot and its reaching the key is waited for and found answered, so its answer
 * is deleted rather than missed by both entries (an answered key no longer running, a running
 * key not yet answered in the snapshot).
 */
function forgetAnswersStep(name: string, organizationId: string, about: Sql, when?: Sql): Sql {
  const ofKey = (alias: string) =>
    sql`${raw(alias)}.scope_type = 'organization' AND ${raw(alias)}.scope_id = ${organizationId}::uuid`;
  return sql`${raw(name)} AS (
      SELECT k.key, k.response_status IS NULL AS running FROM idempotency_keys k
       WHERE ${ofKey('k')} AND ${about}
         ${when ? sql`AND ${when}` : sql``}
       ORDER BY k.key COLLATE "C"
       FOR UPDATE),
    ${raw(`${name}_deleted`)} AS (
      DELETE FROM idempotency_keys k USING ${raw(name)} f
       WHERE ${ofKey('k')} AND k.key = f.key AND NOT f.running),
    ${raw(`${name}_running`)} AS (
      UPDATE idempotency_keys k SET answer_forgotten = true FROM ${raw(name)} f
       WHERE ${ofKey('k')} AND k.key = f.key AND f.running)`;
}

/**
 * The step for a deletion of end users' data (a memory, a fact, a fact's old content): every
 * answer about them, since a stored answer does not say which memory or fact it holds.
 */
export function forgetEndUserAnswersStep(
  name: string,
  organizationId: string,
  userIds: readonly string[],
  when?: Sql,
): Sql {
  return forgetAnswersStep(
    name,
    organizationId,
    sql`k.subject = ANY (${userIds.map(endUserSubject)}::bytea[])`,
    when,
  );
}

/**
 * The step for a personality's deletion, which takes its conversations: the answers of the
 * replies it spoke (the key's `personality_id`, written at the claim).
 */
export function forgetPersonalityAnswersStep(
  name: string,
  organizationId: string,
  personalityId: string,
): Sql {
  return forgetAnswersStep(name, organizationId, sql`k.personality_id = ${personalityId}::uuid`);
}
