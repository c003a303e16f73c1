import { MigrationInterface, QueryRunner } from 'typeorm';

/** The planner settings of LatestMemoriesByIndex, kept: the index scan is the only plan. */
const SETTINGS = 'SET enable_bitmapscan = off SET enable_seqscan = off SET enable_indexscan = on';

/** LatestMemoriesByIndex's read, unchanged. */
const READ = `SELECT m.id, m.role, m.content, m.emotion FROM memories m
          WHERE m.end_user_id = end_user AND m.personality_id = personality
          ORDER BY m.id DESC LIMIT n`;

/** latest_memories in `language` with the given body (the read's settings in both). */
const latestMemories = (language: string, body: string) =>
  `CREATE OR REPLACE FUNCTION "latest_memories"(end_user uuid, personality uuid, n integer)
     RETURNS TABLE (id bigint, role text, content text, emotion text)
     LANGUAGE ${language} STABLE ${SETTINGS}
   AS $$ ${body} $$`;

/**
 * latest_memories in PL/pgSQL, same read and settings. A SQL function that is not inlined (one
 * with settings never is) parses and plans its query again at each execution of the statement
 * that calls it, and a reply calls it twice (its history, and recall's bound): 0.2 ms of a
 * 1.1 ms conversation read (pgbench, an end user of 100 memories). PL/pgSQL keeps the plan for
 * the session, planned under the function's settings, so still the index scan.
 */
export class LatestMemoriesPlannedOnce1795921200000 implements MigrationInterface {
  name = 'LatestMemoriesPlannedOnce1795921200000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(latestMemories('plpgsql', `BEGIN RETURN QUERY ${READ}; END`));
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(latestMemories('sql', READ));
  }
}
