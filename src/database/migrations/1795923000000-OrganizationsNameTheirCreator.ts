import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'organizations_created_by_user_idx';
const FOREIGN_KEY = 'organizations_created_by_user_id_fkey';

/** Organizations given their maker per statement of the backfill. */
const BACKFILL_BATCH = 1_000;

/**
 * Who made each organization: its account, which the instance's shared work (HTML conversions,
 * the heavy-write slot, import slots) is divided by (OrganizationsService.accountOf). Taken from
 * the current first owner, an owner could hand an organization to a user they had invited and
 * promoted, whose uploads then waited behind theirs (found by review, 2026-12-06); the maker
 * never changes. Organizations made before are given their earliest member, whatever their role
 * now (the maker's membership is written with the organization, before any invitation), or none
 * when no member is left; accountOf reads the same rule for a row still without one (written by
 * the previous release during a rolling deploy).
 *
 * Online, outside a transaction, as KeysNameTheirPersonality: the nullable column and the
 * foreign key (NOT VALID) are added under locks held for an instant (lock_timeout: behind a long
 * transaction on the table they give up after 10 s, and the migration is run again), the rows
 * are given their maker in short batches, the key is then validated (which blocks no reader or
 * writer) and the index built concurrently. Each step can run again should the migration stop
 * half way. down() drops what up() adds, in one transaction (TypeORM reverts so).
 */
export class OrganizationsNameTheirCreator1795923000000 implements MigrationInterface {
  name = 'OrganizationsNameTheirCreator1795923000000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET lock_timeout = '10s'`);
    try {
      // Checked first: ADD COLUMN IF NOT EXISTS locks the table even when there is nothing to add.
      const [{ added }] = (await queryRunner.query(
        `SELECT count(*) = 1 AS added FROM pg_attribute
          WHERE attrelid = 'public.organizations'::regclass AND NOT attisdropped
            AND attname = 'created_by_user_id'`,
      )) as Array<{ added: boolean }>;
      if (!added) {
        await queryRunner.query(
          `ALTER TABLE "organizations" ADD COLUMN IF NOT EXISTS "created_by_user_id" uuid`,
        );
      }
      const [{ constrained }] = (await queryRunner.query(
        `SELECT count(*) = 1 AS constrained FROM pg_constraint
          WHERE conrelid = 'public.organizations'::regclass AND conname = $1`,
        [FOREIGN_KEY],
      )) as Array<{ constrained: boolean }>;
      if (!constrained) {
        await queryRunner.query(
          `ALTER TABLE "organizations" ADD CONSTRAINT "${FOREIGN_KEY}" FOREIGN KEY ("created_by_user_id") REFERENCES "users"("id") ON DELETE SET NULL ON UPDATE NO ACTION NOT VALID`,
        );
      }
    } finally {
      await queryRunner.query(`RESET lock_timeout`);
    }
    // By id ranges, each its own statement: no row is held for long, none is read twice.
    let after = '00000000-0000-0000-0000-000000000000';
    for (;;) {
      const [last] = (await queryRunner.query(
        `SELECT batch.id::text AS upto FROM (SELECT id FROM "organizations"
           WHERE id > $1::uuid ORDER BY id LIMIT ${BACKFILL_BATCH}) batch
          ORDER BY batch.id DESC LIMIT 1`,
        [after],
      )) as Array<{ upto: string }>;
      if (!last) break;
      const upto = last.upto;
      await queryRunner.query(
        `UPDATE "organizations" o SET "created_by_user_id" = (
           SELECT m.user_id FROM memberships m WHERE m.organization_id = o.id
            ORDER BY m.created_at, m.user_id LIMIT 1)
          WHERE o.id > $1::uuid AND o.id <= $2::uuid AND o.created_by_user_id IS NULL
            AND EXISTS (SELECT FROM memberships m WHERE m.organization_id = o.id)`,
        [after, upto],
      );
      after = upto;
    }
    await queryRunner.query(`ALTER TABLE "organizations" VALIDATE CONSTRAINT "${FOREIGN_KEY}"`);
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "organizations" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    // Behind a long transaction on the table, given up after 10 s: TypeORM's revert runs this in
    // a transaction of its own (run outside one, by `-t none` or directly, it has no limit).
    await queryRunner.query(`SET LOCAL lock_timeout = '10s'`);
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
    await queryRunner.query(
      `ALTER TABLE "organizations" DROP CONSTRAINT IF EXISTS "${FOREIGN_KEY}"`,
    );
    await queryRunner.query(
      `ALTER TABLE "organizations" DROP COLUMN IF EXISTS "created_by_user_id"`,
    );
  }
}
