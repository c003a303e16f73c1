import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * A resumed turn is marked `completed`, its state emptied, in the statement that stores its
 * exchange: the user's message and the tools' outputs then live in the memories only (a memory
 * forgotten is not kept in the turn until it expires), and a failed answer's give-back, which
 * only takes a `resumed` turn, cannot make a stored turn pending again (found by review).
 *
 * The ALTERs lock the table until the migration commits; it holds turns for minutes only, so
 * the check is validated at once. lock_timeout: behind a long transaction on the table, the
 * migration fails (and is run again) rather than queue every reply's turn behind it.
 */
export class EmptyCompletedToolTurns1795922300000 implements MigrationInterface {
  name = 'EmptyCompletedToolTurns1795922300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET LOCAL lock_timeout = '10s'`);
    await queryRunner.query(`ALTER TABLE "tool_turns" ALTER COLUMN "state" DROP NOT NULL`);
    await queryRunner.query(`ALTER TABLE "tool_turns" DROP CONSTRAINT "tool_turns_status_check"`);
    await queryRunner.query(
      `ALTER TABLE "tool_turns" ADD CONSTRAINT "tool_turns_status_check" CHECK (status IN ('pending', 'resumed', 'completed'))`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DELETE FROM "tool_turns" WHERE status = 'completed'`);
    await queryRunner.query(`ALTER TABLE "tool_turns" DROP CONSTRAINT "tool_turns_status_check"`);
    await queryRunner.query(
      `ALTER TABLE "tool_turns" ADD CONSTRAINT "tool_turns_status_check" CHECK (status IN ('pending', 'resumed'))`,
    );
    await queryRunner.query(`ALTER TABLE "tool_turns" ALTER COLUMN "state" SET NOT NULL`);
  }
}
