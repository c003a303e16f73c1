import { MigrationInterface, QueryRunner } from 'typeorm';

export class EraseIdempotencyAnswers1795693942920 implements MigrationInterface {
  name = 'EraseIdempotencyAnswers1795693942920';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "idempotency_keys" ADD "subject" bytea`);
    await queryRunner.query(
      `CREATE INDEX "idempotency_keys_subject_idx" ON "idempotency_keys" ("scope_id", "subject") WHERE subject IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "public"."idempotency_keys_subject_idx"`);
    await queryRunner.query(`ALTER TABLE "idempotency_keys" DROP COLUMN "subject"`);
  }
}
