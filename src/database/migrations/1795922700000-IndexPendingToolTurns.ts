import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The pending turns of an organization by when they were last paused (their expiry: a turn
 * resumed and paused again is as new as its last pause): a new pause keeps at most
 * TOOL_TURNS_PENDING_PER_ORG of them and ends the oldest beyond (ToolTurnsRepository.save).
 * Partial: completed and resumed turns, most of the table, are never read by it.
 */
export class IndexPendingToolTurns1795922700000 implements MigrationInterface {
  name = 'IndexPendingToolTurns1795922700000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "tool_turns_pending_idx" ON "tool_turns" ("organization_id", "expires_at", "id") WHERE status = 'pending'`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "tool_turns_pending_idx"`);
  }
}
