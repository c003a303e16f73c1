import { MigrationInterface, QueryRunner } from 'typeorm';

export class AddMemoryRetention1795689016619 implements MigrationInterface {
  name = 'AddMemoryRetention1795689016619';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "organizations" ADD "memory_retention_days" integer`);
    await queryRunner.query(
      `ALTER TABLE "organizations" ADD CONSTRAINT "organizations_memory_retention_days_range" CHECK (memory_retention_days BETWEEN 1 AND 3650)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "organizations" DROP CONSTRAINT "organizations_memory_retention_days_range"`,
    );
    await queryRunner.query(`ALTER TABLE "organizations" DROP COLUMN "memory_retention_days"`);
  }
}
