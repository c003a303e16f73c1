import { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The latest memories of an end user with a personality, newest first, read backward along
 * memories_conversation_idx and stopped at `n`, whatever the table's statistics say: a reply's
 * history and the bound below which recall reads (ConversationRepository).
 *
 * Written inline, the read's two plans (that scan, or a bitmap scan of every memory of the
 * conversation then a sort) cost within 1% of each other on a table never analysed, whose rows
 * are estimated at two: the bitmap won, and one end user's replies slowed as their history grew
 * (20,000 replies of bench long-history: 234 to 63 a second; 16 ms a read at 40,000 memories).
 * The function's settings leave the index scan as the only plan; a function with settings is
 * not inlined, so they hold for its query alone (and whatever a session set).
 */
export class LatestMemoriesByIndex1795921100000 implements MigrationInterface {
  name = 'LatestMemoriesByIndex1795921100000';

  public async up(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(
      `CREATE OR REPLACE FUNCTION "latest_memories"(end_user uuid, personality uuid, n integer)
         RETURNS TABLE (id bigint, role text, content text, emotion text)
         LANGUAGE sql STABLE
         SET enable_bitmapscan = off SET enable_seqscan = off SET enable_indexscan = on
       AS $$
         SELECT m.id, m.role, m.content, m.emotion FROM memories m
          WHERE m.end_user_id = end_user AND m.personality_id = personality
          ORDER BY m.id DESC LIMIT n
       $$`,
    );
  }

  public async down(queryRunner: QueryRunner): Promise<void> {
    await queryRunner.query(`DROP FUNCTION IF EXISTS "latest_memories"(uuid, uuid, integer)`);
  }
}
