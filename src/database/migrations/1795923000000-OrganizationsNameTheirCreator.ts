import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Who made each organization: its account, which the instance's shared work (HTML conversions,
 * the heavy-write slot, import slots) is divided by (OrganizationsService.accountOf). Taken from
 * the current first owner, an owner could hand an organization to a user they had invited and
 * promoted, whose uploads then waited behind theirs (found by review, 2026-12-06); the creator
 * never changes. Nullable: adding it rewrites nothing. Organizations made before are given their
 * earliest member, whatever their role now (the creator's membership is written with the
 * organization, before any invitation), or none when no member is left.
 */
export class OrganizationsNameTheirCreator1795923000000 implements MigrationInterface {
  name = 'OrganizationsNameTheirCreator1795923000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`ALTER TABLE "organizations" ADD "created_by_user_id" uuid`);
    await queryRunner.query(
      `ALTER TABLE "organizations" ADD CONSTRAINT "organizations_created_by_user_id_fkey" FOREIGN KEY ("created_by_user_id") REFERENCES "users"("id") ON DELETE SET NULL ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `UPDATE "organizations" o SET "created_by_user_id" = (
         SELECT m.user_id FROM memberships m WHERE m.organization_id = o.id
          ORDER BY m.created_at, m.user_id LIMIT 1)`,
    );
    await queryRunner.query(
      `CREATE INDEX "organizations_created_by_user_idx" ON "organizations" ("created_by_user_id") WHERE created_by_user_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX "organizations_created_by_user_idx"`);
    await queryRunner.query(
      `ALTER TABLE "organizations" DROP CONSTRAINT "organizations_created_by_user_id_fkey"`,
    );
    await queryRunner.query(`ALTER TABLE "organizations" DROP COLUMN "created_by_user_id"`);
  }
}
