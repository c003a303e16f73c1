import { MigrationInterface, QueryRunner } from 'typeorm';

/** Stored outcomes of requests sent with an `Idempotency-Key` (docs/idempotency.md). */
export class CreateIdempotencyKeys1795500100000 implements MigrationInterface {
  name = 'CreateIdempotencyKeys1795500100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "idempotency_keys" (
        "scope_type" text NOT NULL,
        "scope_id" uuid NOT NULL,
        "key" text NOT NULL,
        "request_hash" bytea NOT NULL,
        "response_status" smallint,
        "response_body" text,
        "locked_by" text,
        "locked_until" timestamptz,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "completed_at" timestamptz,
        CONSTRAINT "idempotency_keys_pkey" PRIMARY KEY ("scope_type", "scope_id", "key"),
        CONSTRAINT "idempotency_keys_scope_type_check" CHECK (scope_type IN ('organization', 'user')),
        CONSTRAINT "idempotency_keys_state_check"
          CHECK ((response_status IS NULL) = (locked_by IS NOT NULL AND locked_until IS NOT NULL))
      )`);
    // The retention purge's range scan.
    await queryRunner.query(
      `CREATE INDEX "idempotency_keys_created_at_idx" ON "idempotency_keys" ("created_at")`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "idempotency_keys"`);
  }
}
