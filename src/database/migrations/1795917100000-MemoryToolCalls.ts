import { MigrationInterface, QueryRunner } from 'typeorm';

/** A reply's tool calls, kept on its memory (contract §26); null for a reply that called none. */
export class MemoryToolCalls1795917100000 implements MigrationInterface {
  name = 'MemoryToolCalls1795917100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "memories" ADD "tool_calls" jsonb`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "memories" DROP COLUMN "tool_calls"`);
  }
}
