import { MigrationInterface, QueryRunner } from 'typeorm';
import { createIndexOnline } from '../online-index';

const INDEX = 'idempotency_keys_personality_idx';

/**
 * `personality_id` on a reply's idempotency key, written at its claim: a personality's deletion
 * forgets the stored answers of the replies it spoke (docs/idempotency.md) by this index, instead
 * of keeping them for the key's 24 hours. Keys claimed before this have none; they are gone
 * within those 24 hours.
 *
 * Online, outside a transaction: the nullable column is added without a rewrite, under a lock
 * held for an instant (lock_timeout: behind a long transaction on the table it gives up after
 * 10 s, and is run again); the partial index is built concurrently. Each step can run again
 * should the migration stop half way: an index left invalid by a stopped build is dropped and
 * built again.
 */
export class KeysNameTheirPersonality1795922500000 implements MigrationInterface {
  name = 'KeysNameTheirPersonality1795922500000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`SET lock_timeout = '10s'`);
    try {
      // Checked first: ADD COLUMN IF NOT EXISTS locks the table even when there is nothing to add.
      const [{ added }] = (await queryRunner.query(
        `SELECT count(*) = 1 AS added FROM pg_attribute
          WHERE attrelid = 'public.idempotency_keys'::regclass AND NOT attisdropped
            AND attname = 'personality_id'`,
      )) as Array<{ added: boolean }>;
      if (!added) {
        await queryRunner.query(
          `ALTER TABLE "idempotency_keys" ADD COLUMN IF NOT EXISTS "personality_id" uuid`,
        );
      }
    } finally {
      await queryRunner.query(`RESET lock_timeout`);
    }
    await createIndexOnline(
      queryRunner,
      INDEX,
      `ON "idempotency_keys" ("scope_id", "personality_id") WHERE personality_id IS NOT NULL`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP INDEX IF EXISTS "public"."${INDEX}"`);
    await queryRunner.query(
      `ALTER TABLE "idempotency_keys" DROP COLUMN IF EXISTS "personality_id"`,
    );
  }
}
