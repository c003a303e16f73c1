import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddMemoryThatLasts1795685946001 implements MigrationInterface {
  name = 'AddMemoryThatLasts1795685946001';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "end_user_facts" ("id" uuid NOT NULL DEFAULT uuid_generate_v4(), "organization_id" uuid NOT NULL, "end_user_id" uuid NOT NULL, "content" text NOT NULL, "content_key" text NOT NULL, "source" text NOT NULL, "memory_id" bigint, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "end_user_facts_content_unique" UNIQUE ("end_user_id", "content_key"), CONSTRAINT "end_user_facts_source_check" CHECK (source IN ('api', 'engine')), CONSTRAINT "PK_abae35a93bb2e4db4b5f85ee7a2" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "end_user_facts_memory_idx" ON "end_user_facts" ("memory_id") WHERE memory_id IS NOT NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX "end_user_facts_newest_idx" ON "end_user_facts" ("end_user_id", "created_at", "id") `,
    );
    await queryRunner.query(
      `ALTER TABLE "personalities" ADD "language" text NOT NULL DEFAULT 'en'`,
    );
    await queryRunner.query(
      `ALTER TABLE "personalities" ADD "search_config" text NOT NULL DEFAULT 'english'`,
    );
    await queryRunner.query(
      `ALTER TABLE "memories" ADD "search" tsvector NOT NULL DEFAULT ''::tsvector`,
    );
    await queryRunner.query(
      `CREATE INDEX "memories_organization_created_idx" ON "memories" ("organization_id", "created_at") `,
    );
    // Memories written before: their personalities speak English (the default language).
    await queryRunner.query(`UPDATE "memories" SET "search" = to_tsvector('english', "content")`);
    // One GIN index over the end user, the personality and the lexemes: a search of one end
    // user's memories reads only their entries, however many the organization holds.
    await queryRunner.query(`CREATE EXTENSION IF NOT EXISTS btree_gin`);
    await queryRunner.query(
      `CREATE INDEX "memories_search_idx" ON "memories" USING gin ("end_user_id", "personality_id", "search")`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" ADD CONSTRAINT "end_user_facts_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" ADD CONSTRAINT "end_user_facts_end_user_id_fkey" FOREIGN KEY ("end_user_id") REFERENCES "end_users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" ADD CONSTRAINT "end_user_facts_memory_id_fkey" FOREIGN KEY ("memory_id") REFERENCES "memories"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" DROP CONSTRAINT "end_user_facts_memory_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" DROP CONSTRAINT "end_user_facts_end_user_id_fkey"`,
    );
    await queryRunner.query(
      `ALTER TABLE "end_user_facts" DROP CONSTRAINT "end_user_facts_organization_id_fkey"`,
    );
    await queryRunner.query(`DROP INDEX "public"."memories_search_idx"`);
    await queryRunner.query(`DROP INDEX "public"."memories_organization_created_idx"`);
    await queryRunner.query(`ALTER TABLE "memories" DROP COLUMN "search"`);
    await queryRunner.query(`ALTER TABLE "personalities" DROP COLUMN "search_config"`);
    await queryRunner.query(`ALTER TABLE "personalities" DROP COLUMN "language"`);
    await queryRunner.query(`DROP INDEX "public"."end_user_facts_newest_idx"`);
    await queryRunner.query(`DROP INDEX "public"."end_user_facts_memory_idx"`);
    await queryRunner.query(`DROP TABLE "end_user_facts"`);
  }
}
