import { MigrationInterface, QueryRunner } from 'typeorm';

/** Turns paused for client tools (contract §26), resumable from any instance until they expire. */
export class ToolTurns1795917000000 implements MigrationInterface {
  name = 'ToolTurns1795917000000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "tool_turns" ("id" text NOT NULL, "organization_id" uuid NOT NULL, "end_user_id" uuid NOT NULL, "personality_id" uuid NOT NULL, "status" text NOT NULL DEFAULT 'pending', "state" jsonb NOT NULL, "expires_at" TIMESTAMP WITH TIME ZONE NOT NULL, "created_at" TIMESTAMP WITH TIME ZONE NOT NULL DEFAULT now(), CONSTRAINT "tool_turns_status_check" CHECK (status IN ('pending', 'resumed')), CONSTRAINT "tool_turns_pkey" PRIMARY KEY ("id"))`,
    );
    await queryRunner.query(
      `CREATE INDEX "tool_turns_personality_idx" ON "tool_turns" ("personality_id") `,
    );
    await queryRunner.query(
      `CREATE INDEX "tool_turns_end_user_idx" ON "tool_turns" ("end_user_id") `,
    );
    await queryRunner.query(
      `CREATE INDEX "tool_turns_expires_idx" ON "tool_turns" ("expires_at") `,
    );
    await queryRunner.query(
      `ALTER TABLE "tool_turns" ADD CONSTRAINT "tool_turns_organization_id_fkey" FOREIGN KEY ("organization_id") REFERENCES "organizations"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "tool_turns" ADD CONSTRAINT "tool_turns_end_user_id_fkey" FOREIGN KEY ("end_user_id") REFERENCES "end_users"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
    await queryRunner.query(
      `ALTER TABLE "tool_turns" ADD CONSTRAINT "tool_turns_personality_id_fkey" FOREIGN KEY ("personality_id") REFERENCES "personalities"("id") ON DELETE CASCADE ON UPDATE NO ACTION`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE "tool_turns"`);
  }
}
