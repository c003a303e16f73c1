import { raw, type Sql, sql } from './sql';

/**
 * The `timestamptz` column `column` (a name, as `m.created_at`) as the API writes every time
 * (contract §1): ISO 8601 in UTC to the millisecond, `2026-11-22T01:23:45.678Z`. For times
 * PostgreSQL puts into JSON or text itself (webhook payloads, exports, the system message), which
 * it would otherwise write as `2026-11-22T01:23:45.678912+00:00`.
 */
export function isoTime(column: string): Sql {
  return sql`to_char(${raw(column)} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
}
