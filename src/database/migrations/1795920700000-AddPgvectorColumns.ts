import { MigrationInterface, QueryRunner } from 'typeorm';

/** The embeddings tables and their ids. */
const TABLES = [
  { table: 'memory_embeddings', id: 'memory_id' },
  { table: 'knowledge_chunk_embeddings', id: 'chunk_id' },
];

/** The `vector` type and its inner product, by name: what the columns and the ranking use. */
export const PGVECTOR_USABLE =
  "to_regtype('vector') IS NOT NULL AND to_regoperator('<#>(vector,vector)') IS NOT NULL";

/** Rows given their vector per statement of the backfill. */
const BACKFILL_BATCH = 5_000;

/**
 * pgvector where the database has it (docs/memory.md, "pgvector"): each embedding also as a
 * `vector`, so that the ranking by meaning compares whole vectors with the extension's inner
 * product, written in C, instead of `unnest` over two `real[]` (about 48 µs for 256 dimensions).
 * Where `CREATE EXTENSION vector` fails, whatever the server says (a warning is logged), or the
 * type does not resolve by name, nothing changes and `real[]` serves alone. The service looks
 * for the columns at start-up (Embedder.onModuleInit), not for the extension.
 *
 * A trigger sets `vector` from `embedding` on every insert and on every change of either, so that
 * every writer, an instance of the previous release included, writes it. Online, outside a
 * transaction, as AddEmbeddingSketches: the column is added without a default, the rows get
 * theirs in short batches (until a row has it, the ranking casts its `embedding`). The batches
 * rewrite every row, so until autovacuum passes, the sketches are read from the rows rather than
 * from their covering index (docs/memory.md, "pgvector"). No index on the column: the sketches'
 * shortlist decides which vectors are compared. A database given the extension after this
 * migration ran gets the columns by running it again (docs/memory.md).
 */
export class AddPgvectorColumns1795920700000 implements MigrationInterface {
  name = 'AddPgvectorColumns1795920700000';
  transaction = false;

  public async up(queryRunner: QueryRunner): Promise<void> {
    // The exception block runs the statement in a subtransaction: a failure leaves nothing. Any
    // failure: what a server says of an extension it lacks varies (58P01 before PostgreSQL 15,
    // 0A000 since; 22023 on RDS; XX000 for a library that does not load), and it is optional.
    await queryRunner.query(
      `DO $$ BEGIN CREATE EXTENSION IF NOT EXISTS vector;
         EXCEPTION WHEN OTHERS THEN
           RAISE WARNING 'pgvector is not available (%: %): embeddings stay real[] only',
             SQLSTATE, SQLERRM;
         END $$`,
    );
    // Installed, and reachable by name from this session (an extension in a schema off the
    // search_path, as Supabase's `extensions`, is not: the columns below would not resolve).
    const [{ usable }] = (await queryRunner.query(`SELECT ${PGVECTOR_USABLE} AS usable`)) as Array<{
      usable: boolean;
    }>;
    if (!usable) return;
    await queryRunner.query(`SET lock_timeout = '10s'`);
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION embeddings_set_vector() RETURNS trigger LANGUAGE plpgsql
         AS $$ BEGIN NEW.vector := NEW.embedding::vector; RETURN NEW; END $$`,
    );
    for (const { table, id } of TABLES) {
      await queryRunner.query(`ALTER TABLE "${table}" ADD COLUMN IF NOT EXISTS "vector" vector`);
      await queryRunner.query(
        `CREATE OR REPLACE TRIGGER "${table}_set_vector"
           BEFORE INSERT OR UPDATE OF "embedding", "vector" ON "${table}"
           FOR EACH ROW EXECUTE FUNCTION embeddings_set_vector()`,
      );
      // By id ranges, each its own statement: no row is held for long, none is read twice.
      let after = '0';
      for (;;) {
        const [{ upto }] = (await queryRunner.query(
          `SELECT max("${id}")::text AS upto FROM (SELECT "${id}" FROM "${table}"
             WHERE "${id}" > $1 ORDER BY "${id}" LIMIT ${BACKFILL_BATCH}) batch`,
          [after],
        )) as Array<{ upto: string | null }>;
        if (upto === null) break;
        // The trigger computes it; the sketch's trigger does not fire (embedding is not set).
        await queryRunner.query(
          `UPDATE "${table}" SET "vector" = NULL
            WHERE "${id}" > $1 AND "${id}" <= $2 AND "vector" IS NULL`,
          [after, upto],
        );
        after = upto;
      }
    }
    await queryRunner.query(`RESET lock_timeout`);
  }

  /** The extension stays: other schemas may use it, and dropping it is the operator's choice. */
  public async down(queryRunner: QueryRunner): Promise<void> {
    for (const { table } of TABLES) {
      await queryRunner.query(`DROP TRIGGER IF EXISTS "${table}_set_vector" ON "${table}"`);
      await queryRunner.query(`ALTER TABLE "${table}" DROP COLUMN IF EXISTS "vector"`);
    }
    await queryRunner.query(`DROP FUNCTION IF EXISTS embeddings_set_vector()`);
  }
}
