import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * Sign sketches of the embeddings (docs/memory.md, "The bound"): one bit per dimension, set where
 * the component is positive. The ranking by meaning orders an end user's (an organization's)
 * latest EMBEDDINGS_CANDIDATES by the Hamming distance of their sketches to the question's, read
 * from the covering indexes below without touching the rows, and compares whole vectors only for
 * the nearest few. `embedding_sketch` is the one definition, used by the worker's writes, this
 * backfill and the question's side.
 */
/** Each embeddings table, its bound's index (owner, then id), and what that index carries. */
const TABLES = [
  {
    table: 'memory_embeddings',
    index: 'memory_embeddings_end_user_idx',
    key: '"end_user_id", "memory_id"',
    carried: '"personality_id", "model", "sketch"',
  },
  {
    table: 'knowledge_chunk_embeddings',
    index: 'knowledge_chunk_embeddings_organization_idx',
    key: '"organization_id", "chunk_id"',
    carried: '"model", "sketch"',
  },
];

export class AddEmbeddingSketches1795920200000 implements MigrationInterface {
  name = 'AddEmbeddingSketches1795920200000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE FUNCTION embedding_sketch(embedding real[]) RETURNS bit varying
         LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
         AS $$ SELECT coalesce(string_agg(CASE WHEN v > 0 THEN '1' ELSE '0' END, '' ORDER BY i), '')::bit varying
                 FROM unnest(embedding) WITH ORDINALITY AS u(v, i) $$`,
    );
    for (const { table, index, key, carried } of TABLES) {
      // The lock keeps the worker's writes (which carry no sketch yet) out of the backfill.
      await queryRunner.query(`LOCK TABLE "${table}" IN SHARE ROW EXCLUSIVE MODE`);
      await queryRunner.query(`ALTER TABLE "${table}" ADD "sketch" bit varying`);
      await queryRunner.query(`UPDATE "${table}" SET "sketch" = embedding_sketch("embedding")`);
      await queryRunner.query(`ALTER TABLE "${table}" ALTER COLUMN "sketch" SET NOT NULL`);
      await queryRunner.query(`DROP INDEX "public"."${index}"`);
      await queryRunner.query(
        `CREATE INDEX "${index}" ON "${table}" (${key}) INCLUDE (${carried})`,
      );
    }
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const { table, index, key } of TABLES) {
      await queryRunner.query(`DROP INDEX "public"."${index}"`);
      await queryRunner.query(`CREATE INDEX "${index}" ON "${table}" (${key})`);
      await queryRunner.query(`ALTER TABLE "${table}" DROP COLUMN "sketch"`);
    }
    await queryRunner.query(`DROP FUNCTION embedding_sketch(real[])`);
  }
}
