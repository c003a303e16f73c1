import { Cte, type Source, sql } from '../database/sql';

/**
 * A WITH entry ending every access token issued so far to each user of `source` (`user_id`):
 * their token version is raised, so a token carrying the old one no longer authenticates; its
 * rows are the users' ids. In the statement that makes the change, the tokens end with it.
 */
export function tokensEndedStep(source: Source<'user_id'>): Cte<'id'> {
  return new Cte(
    `${source.name}_tokens_ended`,
    sql`UPDATE users SET token_version = token_version + 1
         WHERE id IN (SELECT user_id FROM ${source.ref}) RETURNING id`,
    ['id'],
  );
}
