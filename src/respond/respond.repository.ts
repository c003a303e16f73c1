import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { DEADLOCK_ATTEMPTS, Database } from '../database/database';
import { sql, type WithEntry, withEntries } from '../database/sql';

/**
 * The one statement of /v1/respond's write. It owns no table: the memories, the month's
 * relationship and the token counts are written by steps their owners lend (memories.step.ts,
 * usage.steps.ts). Composed into one WITH statement they are one transaction in one round trip,
 * instead of BEGIN, an INSERT per module and COMMIT on a checked-out client.
 */
@Injectable()
export class RespondRepository {
  constructor(private readonly database: Database) {}

  /**
   * Runs the steps as one prepared statement: its text depends only on the steps' shape, never
   * on their values, so each shape is prepared once per connection. On its own (no `manager`),
   * it is sent again when PostgreSQL ends a deadlock with it: an erasure locks the end user, then
   * their tool turns, while this statement has locked the resumed turn and checks the end user
   * last (its memories' foreign key). The erasure then finishes first, and the statement sent
   * again is refused as the end user's who went (found by review: a 500, tokens uncounted).
   */
  async storeExchange(steps: WithEntry[], manager?: EntityManager): Promise<void> {
    await this.database.count(withEntries(steps, sql`SELECT 1`), {
      prepared: true,
      manager,
      deadlockAttempts: DEADLOCK_ATTEMPTS,
    });
  }
}
