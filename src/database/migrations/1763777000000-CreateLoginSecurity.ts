import { MigrationInterface, QueryRunner } from 'typeorm';

/** Password-login lockout counters, password reset tokens and linked SSO identities. */
export class CreateLoginSecurity1763777000000 implements MigrationInterface {
  name = 'CreateLoginSecurity1763777000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // Keyed by the normalised address, not by user: unknown addresses are counted too, so the
    // answers do not reveal which addresses have an account.
    await queryRunner.query(`
      CREATE TABLE "login_attempts" (
        "email" text PRIMARY KEY CHECK ("email" = lower("email")),
        "failures" timestamptz[] NOT NULL DEFAULT '{}',
        "locked_at" timestamptz,
        "refused_while_locked" integer NOT NULL DEFAULT 0,
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(
      `CREATE INDEX "login_attempts_updated_idx" ON "login_attempts" ("updated_at")`,
    );

    await queryRunner.query(`
      CREATE TABLE "password_reset_tokens" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "user_id" uuid NOT NULL REFERENCES "users" ("id") ON DELETE CASCADE,
        "token_hash" bytea NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "expires_at" timestamptz NOT NULL,
        "used_at" timestamptz,
        CONSTRAINT "password_reset_tokens_hash_unique" UNIQUE ("token_hash")
      )`);
    await queryRunner.query(
      `CREATE INDEX "password_reset_tokens_user_idx" ON "password_reset_tokens" ("user_id")`,
    );

    await queryRunner.query(`
      CREATE TABLE "sso_identities" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "user_id" uuid NOT NULL REFERENCES "users" ("id") ON DELETE CASCADE,
        "provider" text NOT NULL,
        "subject" text NOT NULL,
        "email" text,
        "linked_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "sso_identities_provider_subject_unique" UNIQUE ("provider", "subject")
      )`);
    await queryRunner.query(
      `CREATE INDEX "sso_identities_user_idx" ON "sso_identities" ("user_id", "linked_at")`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "sso_identities"`);
    await queryRunner.query(`DROP TABLE "password_reset_tokens"`);
    await queryRunner.query(`DROP TABLE "login_attempts"`);
  }
}
