import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The EmbeddingWorker's queue (docs/memory.md, "Recall by meaning"): the rows its cursor has
 * passed and that wait for their embedding, drawn from organization by organization. A new
 * table: nothing else is locked or rewritten. The rows the cursor had already passed are
 * embedded (or passed over), so the queue starts empty. The cursor's lease columns stay for the
 * previous release during a rolling deploy (it embeds above the cursor and moves it, which this
 * release's enqueueing only ever moves forward too); a later release drops them.
 *
 * Items are deleted from the head of each organization's line as fast as they are embedded:
 * vacuumed every 10,000 dead rows rather than at a fifth of the table, or the scans of a queue
 * of a million walk over the dead entries of those before them.
 *
 * Going back to the previous release needs `down`: the queue is then the only record of the
 * rows the cursor passed and that wait for their embedding, so `down` moves each cursor back
 * before its first waiting row (those after it are embedded again: a provider call, the same
 * vector) before dropping the queue.
 */
export class QueueEmbeddingsByOrganization1795922600000 implements MigrationInterface {
  name = 'QueueEmbeddingsByOrganization1795922600000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE TABLE "embedding_queue" ("source" text NOT NULL, "model" text NOT NULL, "organization_id" uuid NOT NULL, "row_id" bigint NOT NULL, "claimed_until" TIMESTAMP WITH TIME ZONE, "claim_token" uuid, CONSTRAINT "embedding_queue_pkey" PRIMARY KEY ("source", "model", "organization_id", "row_id"))`,
    );
    await queryRunner.query(
      `ALTER TABLE "embedding_queue" SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 10000)`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    // Nothing queued, nor a cursor moved, between the look and the drop (a worker of this
    // release still running would lose what it queued meanwhile).
    await queryRunner.query(
      `LOCK TABLE "embedding_queue", "embedding_cursors" IN ACCESS EXCLUSIVE MODE`,
    );
    await queryRunner.query(
      `UPDATE "embedding_cursors" c SET "position" = q.first - 1
         FROM (SELECT "source", "model", min("row_id") AS first FROM "embedding_queue"
                GROUP BY "source", "model") q
        WHERE c."source" = q."source" AND c."model" = q."model" AND c."position" >= q.first`,
    );
    await queryRunner.query(`DROP TABLE "embedding_queue"`);
  }
}
