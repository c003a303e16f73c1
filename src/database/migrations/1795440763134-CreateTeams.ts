import { MigrationInterface, QueryRunner } from 'typeorm';

/** Invitations to organizations and the audit log (docs/teams.md). */
export class CreateTeams1795440763134 implements MigrationInterface {
  name = 'CreateTeams1795440763134';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`
      CREATE TABLE "invitations" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL
          CONSTRAINT "invitations_organization_id_fkey" REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "email" text NOT NULL,
        "email_key" text NOT NULL,
        "role" text NOT NULL CONSTRAINT "invitations_role_check" CHECK (role IN ('owner', 'admin', 'member')),
        "token_hash" bytea NOT NULL,
        "invited_by_user_id" uuid
          CONSTRAINT "invitations_invited_by_user_id_fkey" REFERENCES "users" ("id") ON DELETE SET NULL,
        "created_at" timestamptz NOT NULL DEFAULT now(),
        "expires_at" timestamptz NOT NULL,
        "accepted_at" timestamptz,
        "accepted_by_user_id" uuid
          CONSTRAINT "invitations_accepted_by_user_id_fkey" REFERENCES "users" ("id") ON DELETE SET NULL,
        "revoked_at" timestamptz
      )`);
    await queryRunner.query(
      `CREATE UNIQUE INDEX "invitations_token_hash_unique" ON "invitations" ("token_hash")`,
    );
    // One open (pending or expired, not accepted or revoked) invitation per address: a second
    // invitation replaces it (INSERT … ON CONFLICT on this index).
    await queryRunner.query(
      `CREATE UNIQUE INDEX "invitations_open_email_unique" ON "invitations" ("organization_id", "email_key")
        WHERE accepted_at IS NULL AND revoked_at IS NULL`,
    );
    await queryRunner.query(
      `CREATE INDEX "invitations_organization_idx" ON "invitations" ("organization_id", "created_at", "id")`,
    );

    // Actor and target are plain ids, not foreign keys: the trail outlives what it names.
    await queryRunner.query(`
      CREATE TABLE "audit_events" (
        "id" uuid PRIMARY KEY DEFAULT gen_random_uuid(),
        "organization_id" uuid NOT NULL
          CONSTRAINT "audit_events_organization_id_fkey" REFERENCES "organizations" ("id") ON DELETE CASCADE,
        "action" text NOT NULL,
        "actor_type" text NOT NULL,
        "actor_id" text NOT NULL,
        "target_type" text NOT NULL,
        "target_id" text NOT NULL,
        "ip" text,
        "request_id" text,
        "details" jsonb NOT NULL,
        "created_at" timestamptz NOT NULL DEFAULT clock_timestamp()
      )`);
    await queryRunner.query(
      `CREATE INDEX "audit_events_organization_idx" ON "audit_events" ("organization_id", "created_at", "id")`,
    );
    // The retention purge's range scan.
    await queryRunner.query(
      `CREATE INDEX "audit_events_created_at_idx" ON "audit_events" ("created_at")`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "audit_events"`);
    await queryRunner.query(`DROP TABLE "invitations"`);
  }
}
