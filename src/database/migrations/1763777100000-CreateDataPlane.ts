import { MigrationInterface, QueryRunner } from 'typeorm';

export class CreateDataPlane1763777100000 implements MigrationInterface {
  name = 'CreateDataPlane1763777100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    // The catalog is global (operators manage it from the CLI); organizations clone from it.
    await queryRunner.query(`
      CREATE TABLE "catalog_personalities" (
        "slug" text PRIMARY KEY,
        "name" text NOT NULL,
        "description" text NOT NULL,
        "version" text NOT NULL,
        "traits" jsonb NOT NULL,
        "voice" jsonb NOT NULL,
        "system_prompt" text NOT NULL,
        "replies" jsonb NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);

    // A clone holds its own copy of every field: nothing refers back to the catalog row.
    await queryRunner.query(`
      CREATE TABLE "personalities" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "source_slug" text NOT NULL,
        "source_version" text NOT NULL,
        "name" text NOT NULL,
        "description" text NOT NULL,
        "traits" jsonb NOT NULL,
        "voice" jsonb NOT NULL,
        "system_prompt" text NOT NULL,
        "replies" jsonb NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now()
      )`);
    await queryRunner.query(
      `CREATE INDEX "personalities_organization_idx" ON "personalities" ("organization_id", "created_at", "id")`,
    );

    // The pair (organization, user_id) is one row, whoever creates it first (rule 5). A pending
    // erasure lives in the row itself (status + erase_after), so it survives restarts.
    await queryRunner.query(`
      CREATE TABLE "end_users" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "user_id" text NOT NULL,
        "metadata" jsonb NOT NULL DEFAULT '{}'::jsonb,
        "status" text NOT NULL DEFAULT 'active' CHECK ("status" IN ('active', 'deleting')),
        "erase_after" timestamptz,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "updated_at" timestamptz NOT NULL DEFAULT now(),
        CONSTRAINT "end_users_organization_user_id_unique" UNIQUE ("organization_id", "user_id"),
        CONSTRAINT "end_users_erasure_scheduled" CHECK (("status" = 'deleting') = ("erase_after" IS NOT NULL))
      )`);
    await queryRunner.query(
      `CREATE INDEX "end_users_erasure_due_idx" ON "end_users" ("erase_after") WHERE "status" = 'deleting'`,
    );

    await queryRunner.query(`
      CREATE TABLE "memories" (
        "id" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        "organization_id" uuid NOT NULL,
        "end_user_id" uuid NOT NULL REFERENCES "end_users" ("id") ON DELETE CASCADE,
        "personality_id" uuid NOT NULL REFERENCES "personalities" ("id") ON DELETE CASCADE,
        "role" text NOT NULL CHECK ("role" IN ('user', 'personality')),
        "content" text NOT NULL,
        "emotion" text,
        "intensity" real,
        "vocabulary_version" text,
        "created_at" timestamptz NOT NULL DEFAULT now()
      )`);
    // Export reads a user's memories in order; the engine reads the latest per personality.
    await queryRunner.query(
      `CREATE INDEX "memories_end_user_idx" ON "memories" ("end_user_id", "id")`,
    );
    await queryRunner.query(
      `CREATE INDEX "memories_conversation_idx" ON "memories" ("end_user_id", "personality_id", "id")`,
    );
    await queryRunner.query(
      `CREATE INDEX "memories_personality_idx" ON "memories" ("personality_id")`,
    );

    // One row per relationship active in a month: the billing unit. No foreign key to
    // personalities: deleting a personality does not rewrite a month that was already used.
    await queryRunner.query(`
      CREATE TABLE "relationship_months" (
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "month" date NOT NULL CHECK (extract(day FROM "month") = 1),
        "end_user_id" uuid NOT NULL REFERENCES "end_users" ("id") ON DELETE CASCADE,
        "personality_id" uuid NOT NULL,
        "first_active_at" timestamptz NOT NULL,
        PRIMARY KEY ("organization_id", "month", "end_user_id", "personality_id")
      )`);
    await queryRunner.query(
      `CREATE INDEX "relationship_months_end_user_idx" ON "relationship_months" ("end_user_id")`,
    );
    await queryRunner.query(
      `CREATE INDEX "relationship_months_items_idx" ON "relationship_months" ("organization_id", "month", "personality_id", "end_user_id")`,
    );

    // Incremented in the statement that inserts a new relationship_months row, so reading a
    // month is one primary-key lookup. Erasure keeps it: a relationship that was active was used.
    await queryRunner.query(`
      CREATE TABLE "usage_monthly_counters" (
        "organization_id" uuid NOT NULL REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "month" date NOT NULL,
        "active_relationships" bigint NOT NULL,
        PRIMARY KEY ("organization_id", "month")
      )`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "usage_monthly_counters"`);
    await queryRunner.query(`DROP TABLE "relationship_months"`);
    await queryRunner.query(`DROP TABLE "memories"`);
    await queryRunner.query(`DROP TABLE "end_users"`);
    await queryRunner.query(`DROP TABLE "personalities"`);
    await queryRunner.query(`DROP TABLE "catalog_personalities"`);
  }
}
