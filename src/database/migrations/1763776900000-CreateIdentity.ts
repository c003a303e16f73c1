import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateIdentity1763776900000 implements MigrationInterface {
  name = 'CreateIdentity1763776900000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "users" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "email" text NOT NULL,
        "name" text,
        "password_hash" text NOT NULL,
        "token_version" integer NOT NULL DEFAULT 0,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);
    // E-mail addresses are unique whatever their case.
    await queryRunner.query(
      `CREATE UNIQUE INDEX "users_email_lower_unique" ON "users" (lower("email"))`,
    );

    await queryRunner.query(`
      CREATE TABLE "organizations" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "name" text NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);

    await queryRunner.query(`
      CREATE TABLE "memberships" (
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "user_id" uuid NOT NULL REFERENCES "users" ("id") ON DELETE CASCADE,
        "role" text NOT NULL CHECK ("role" IN ('owner', 'admin', 'member')),
        "created_at" timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY ("organization_id", "user_id")
      )`);
    await queryRunner.query(
      `CREATE INDEX "memberships_user_idx" ON "memberships" ("user_id", "created_at")`,
    );

    await queryRunner.query(`
      CREATE TABLE "api_keys" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "name" text NOT NULL,
        "scopes" text[] NOT NULL,
        "prefix" text NOT NULL,
        "last_four" text NOT NULL,
        "key_hash" bytea NOT NULL,
        "created_by_user_id" uuid REFERENCES "users" ("id") ON DELETE SET NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "expires_at" timestamptz,
        "last_used_at" timestamptz,
        "revoked_at" timestamptz,
        CONSTRAINT "api_keys_key_hash_unique" UNIQUE ("key_hash")
      )`);
    await queryRunner.query(
      `CREATE INDEX "api_keys_organization_idx" ON "api_keys" ("organization_id", "created_at")`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "api_keys"`);
    await queryRunner.query(`DROP TABLE "memberships"`);
    await queryRunner.query(`DROP TABLE "organizations"`);
    await queryRunner.query(`DROP TABLE "users"`);
  }
}
