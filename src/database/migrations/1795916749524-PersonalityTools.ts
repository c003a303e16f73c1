import { MigrationInterface, QueryRunner } from 'typeorm';

/** A personality's tools (contract §26): none until the business defines some. */
export class PersonalityTools1795916749524 implements MigrationInterface {
  name = 'PersonalityTools1795916749524';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "personalities" ADD "tools" jsonb NOT NULL DEFAULT '[]'`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "personalities" DROP COLUMN "tools"`);
  }
}
