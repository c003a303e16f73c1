import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * `answer_forgotten` marks a key whose request was still running when one of its end user's
 * memories or facts was deleted: its answer, which may hold what was deleted, is not kept for a
 * replay (docs/idempotency.md). A mark rather than taking the key from its request, whose lease
 * must go on being renewed (a retry meanwhile gets 409, and the request never runs twice).
 *
 * A column with a constant default is added without rewriting the table (PostgreSQL 11+), under
 * a lock held for an instant. lock_timeout: behind a long transaction on the table, the
 * migration gives up after 10 s (and is run again), so keyed requests queue behind its lock
 * request for at most that long rather than for as long as that transaction lasts.
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
    // A forgotten answer must not become a kept one. A key still running keeps its request; its
    // answer is then stored, as before this migration.
    await queryRunner.query(
      `DELETE FROM "idempotency_keys" WHERE "answer_forgotten" AND "response_status" IS NOT NULL`,
    );
    await queryRunner.query(`ALTER TABLE "idempotency_keys" DROP COLUMN "answer_forgotten"`);
  }
}
