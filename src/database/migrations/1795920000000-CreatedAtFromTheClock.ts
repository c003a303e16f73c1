import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * audit_events, webhook_events and webhook_delivery_attempts took created_at from the database's
 * clock_timestamp(); the service now writes it from its Clock, as it does every other time, so
 * a spec's clock dates what it reads back and what retention purges. No default: an insert that
 * forgets the time fails instead of mixing the two clocks.
 */
export class CreatedAtFromTheClock1795920000000 implements MigrationInterface {
  name = 'CreatedAtFromTheClock1795920000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    for (const table of TABLES) {
      await queryRunner.query(`ALTER TABLE "${table}" ALTER COLUMN "created_at" DROP DEFAULT`);
    }
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const table of TABLES) {
      await queryRunner.query(
        `ALTER TABLE "${table}" ALTER COLUMN "created_at" SET DEFAULT clock_timestamp()`,
      );
    }
  }
}

const TABLES = ['audit_events', 'webhook_events', 'webhook_delivery_attempts'];
