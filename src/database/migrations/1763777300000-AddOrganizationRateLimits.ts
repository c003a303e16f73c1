import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Per-organization bucket sizes, set by a plan that raises an organization's rate limit.
 * NULL means the deployment's RATE_LIMIT_ORG_RPS / RATE_LIMIT_ORG_BURST.
 */
export class AddOrganizationRateLimits1763777300000 implements MigrationInterface {
  name = 'AddOrganizationRateLimits1763777300000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE "organizations"
        ADD COLUMN "rate_limit_rps" double precision
          CONSTRAINT "organizations_rate_limit_rps_positive" CHECK ("rate_limit_rps" > 0),
        ADD COLUMN "rate_limit_burst" integer
          CONSTRAINT "organizations_rate_limit_burst_positive" CHECK ("rate_limit_burst" >= 1)`);
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      ALTER TABLE "organizations" DROP COLUMN "rate_limit_burst", DROP COLUMN "rate_limit_rps"`);
  }
}
