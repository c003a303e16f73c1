import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `answer_forgotten` marks a key whose request was still running when one of its end user's
 * memories or facts was deleted: its answer, which may hold what was deleted, is not kept for a
 * replay (docs/idempotency.md). A mark rather than taking the key from its request, whose lease
 * must go on being renewed (a retry meanwhile gets 409, and the request never runs twice).
 *
 * A column with a constant default is added without rewriting the table (PostgreSQL 11+);
 * lock_timeout: behind a long transaction on the table, the migration fails (and is run again)
 * rather than queue every keyed request behind it.
 */
export class MarkForgottenIdempotencyAnswers1795922400000 implements MigrationInterface {
  name = 'MarkForgottenIdempotencyAnswers1795922400000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET LOCAL lock_timeout = '10s'`);
    await queryRunner.query(
      `ALTER TABLE "idempotency_keys" ADD "answer_forgotten" boolean NOT NULL DEFAULT false`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    // A forgotten answer must not become a kept one.
    await queryRunner.query(
      `DELETE FROM "idempotency_keys" WHERE "answer_forgotten" AND "response_status" IS NOT NULL`,
    );
    await queryRunner.query(`ALTER TABLE "idempotency_keys" DROP COLUMN "answer_forgotten"`);
  }
}
