import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The pending turns of an organization, oldest first (by when they were first paused: a ULID's
 * order within a millisecond is random): a new pause keeps at most
 * TOOL_TURNS_PENDING_PER_ORG of them and ends the oldest beyond (ToolTurnsRepository.save).
 * Partial: completed and resumed turns, most of the table, are never read by it.
 */
export class IndexPendingToolTurns1795922700000 implements MigrationInterface {
  name = 'IndexPendingToolTurns1795922700000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE INDEX "tool_turns_pending_idx" ON "tool_turns" ("organization_id", "created_at", "id") WHERE status = 'pending'`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "tool_turns_pending_idx"`);
  }
}
