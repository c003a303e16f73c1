import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The access tokens their holders signed out of (POST /v1/auth/logout), by the SHA-256 of the
 * token, until the token would have expired anyway: the service refuses them from then on. A new
 * table: nothing to do online.
 */
export class EndSignedOutTokens1795923100000 implements MigrationInterface {
  name = 'EndSignedOutTokens1795923100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE signed_out_tokens (
         token_hash bytea NOT NULL,
         user_id uuid NOT NULL,
         expires_at timestamptz NOT NULL,
         CONSTRAINT signed_out_tokens_pkey PRIMARY KEY (token_hash),
         CONSTRAINT signed_out_tokens_user_id_fkey FOREIGN KEY (user_id)
           REFERENCES users (id) ON DELETE CASCADE
       )`,
    );
    await queryRunner.query(
      `CREATE INDEX signed_out_tokens_expires_at_idx ON signed_out_tokens (expires_at)`,
    );
    await queryRunner.query(
      `CREATE INDEX signed_out_tokens_user_id_idx ON signed_out_tokens (user_id)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP TABLE signed_out_tokens`);
  }
}
