import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddSafety1795687625115 implements MigrationInterface {
  name = 'AddSafety1795687625115';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "organization_safety_settings" ("organization_id" uuid NOT NULL, "crisis_response" boolean NOT NULL, "crisis_message" text, "input_moderation" text NOT NULL, "output_moderation" text NOT NULL, "updated_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "organization_safety_output_check" CHECK (output_moderation IN ('off', 'flag', 'block')), CONSTRAINT "organization_safety_input_check" CHECK (input_moderation IN ('off', 'flag', 'block')), CONSTRAINT "PK_7daeda6e2531d506578fe27cd1b" PRIMARY KEY ("organization_id"))`,
    );
    await queryRunner.query(`ALTER TABLE "memories" ADD "safety" jsonb`);
    await queryRunner.query(
      `ALTER TABLE "organization_safety_settings" ADD CONSTRAINT "organization_safety_settings_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "organization_safety_settings" DROP CONSTRAINT "organization_safety_settings_organization_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "memories" DROP COLUMN "safety"`);
    await queryRunner.query(`DROP TABLE "organization_safety_settings"`);
  }
}
