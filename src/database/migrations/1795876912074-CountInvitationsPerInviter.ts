import { MigrationInterface, QueryRunner } from 'typeorm';

export class CountInvitationsPerInviter1795876912074 implements MigrationInterface {
  name = 'CountInvitationsPerInviter1795876912074';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "inviter_days" ("user_id" uuid NOT NULL, "day" date NOT NULL, "sent" integer NOT NULL, CONSTRAINT "inviter_days_pkey" PRIMARY KEY ("user_id"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "inviter_days" ADD CONSTRAINT "inviter_days_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `ALTER TABLE "inviter_days" DROP CONSTRAINT "inviter_days_user_id_fkey"`,
    );
    await queryRunner.query(`DROP TABLE "inviter_days"`);
  }
}
