import { AppError } from '../common/errors/app-error';
import { type Sql, sql } from '../database/sql';

/** The answer to a request whose access token a password reset has ended. */
export const tokenNoLongerValid = () =>
  AppError.unauthenticated('The access token is no longer valid');

/**
 * The condition that a user's row (its `token_version` column, e.g. sql`u.token_version`) still
 * holds the version of the access token a write was asked with; true when there is none (a
 * caller the service builds itself). A password reset raises the version under FOR UPDATE on
 * the row, so a statement that checks this while holding the row FOR KEY SHARE (or more) makes
 * nothing after a reset it raced: it waits for the reset, then finds the version changed.
 */
export function tokenVersionHeld(column: Sql, tokenVersion: number | undefined): Sql {
  const version = tokenVersion ?? null;
  return sql`(${version}::int IS NULL OR ${column} = ${version}::int)`;
}
