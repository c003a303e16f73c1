import { MigrationInterface, QueryRunner } from 'typeorm';

/** The keys made a UTC day in each member's lines of an organization (API_KEYS_PER_DAY). */
export class CountApiKeysMadeADay1795923200000 implements MigrationInterface {
  name = 'CountApiKeysMadeADay1795923200000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "api_key_daily_creations" ("organization_id" uuid NOT NULL, "maker_id" uuid NOT NULL, "through_key" boolean NOT NULL, "day" date NOT NULL, "keys" integer NOT NULL, CONSTRAINT "api_key_daily_creations_pkey" PRIMARY KEY ("organization_id", "maker_id", "through_key", "day"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "api_key_daily_creations" ADD CONSTRAINT "api_key_daily_creations_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "api_key_daily_creations"`);
  }
}
