import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { ErasureParticipants } from '../src/common/erasure/erasure-participants';
import { createTestApp, type TestApp } from './support/test-app';

/**
 * The tables that hold an end user's id, found from the schema alone: end_users, every table with
 * an end_user_id column (a foreign key or not: memory_terms has none), and every table with a
 * foreign key to one of those (end_user_facts points at memories), to any depth.
 */
const TABLES_HOLDING_END_USERS = `
  WITH RECURSIVE holding(oid) AS (
    SELECT c.oid FROM pg_class c
     WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'p')
       AND (c.relname = 'end_users' OR EXISTS (
             SELECT 1 FROM pg_attribute a
              WHERE a.attrelid = c.oid AND a.attname ~ 'end_user_id' AND NOT a.attisdropped))
    UNION
    SELECT f.conrelid FROM pg_constraint f JOIN holding h ON f.confrelid = h.oid
     WHERE f.contype = 'f'
  )
  SELECT relname AS name FROM pg_class WHERE oid IN (SELECT oid FROM holding) ORDER BY relname`;

/** The section of docs/data-plane.md that lists every place an end user's data lives. */
function dataPlaneDocsTable(): string {
  const docs = readFileSync(join(__dirname, '..', 'docs', 'data-plane.md'), 'utf8');
  const start = docs.indexOf("## Where an end user's data lives");
  expect(start).toBeGreaterThan(-1);
  return docs.slice(start, docs.indexOf('\n## ', start + 1));
}

/**
 * Erasure reaches a table only through a participant that claims it (docs/data-plane.md): a new
 * table holding an end user's id fails here until its module registers one.
 */
describe('Erasure coverage: every table holding an end user is claimed by a participant', () => {
  let t: TestApp;
  let dataSource: DataSource;
  let claimed: Array<{ participant: string; table: string; cascades: boolean }>;

  beforeAll(async () => {
    t = await createTestApp();
    dataSource = t.app.get(DataSource);
    claimed = t.app.get(ErasureParticipants).inOrder.flatMap((participant) => [
      ...participant.tables.map((table) => ({
        participant: participant.name,
        table,
        cascades: false,
      })),
      ...(participant.cascades ?? []).map((table) => ({
        participant: participant.name,
        table,
        cascades: true,
      })),
    ]);
  });

  afterAll(async () => {
    await t.close();
  });

  it('claims every table that holds an end user, each once', async () => {
    const holding: Array<{ name: string }> = await dataSource.query(TABLES_HOLDING_END_USERS);
    // The walk itself works: the tables known today are among those it finds.
    expect(holding.map((row) => row.name)).toEqual(
      expect.arrayContaining(['end_users', 'memories', 'memory_terms', 'end_user_facts']),
    );

    const claimedTables = claimed.map((claim) => claim.table);
    expect(holding.map((row) => row.name).filter((name) => !claimedTables.includes(name))).toEqual(
      [],
    );
    expect(claimedTables.filter((table, i) => claimedTables.indexOf(table) !== i)).toEqual([]);
  });

  it('claims only tables that exist', async () => {
    const tables: Array<{ name: string }> = await dataSource.query(
      `SELECT table_name AS name FROM information_schema.tables
        WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`,
    );
    const names = tables.map((row) => row.name);
    expect(claimed.filter((claim) => !names.includes(claim.table))).toEqual([]);
  });

  it('erases in parts only tables a participant also erases: what the parts leave is erased whole', () => {
    const parts = t.app.get(ErasureParticipants).inParts;
    expect(parts.map((part) => part.name)).toContain('MemoriesRepository.eraseEndUsersInParts');
    const erased = claimed.filter((claim) => !claim.cascades).map((claim) => claim.table);
    expect(parts.flatMap((part) => part.tables).filter((table) => !erased.includes(table))).toEqual(
      [],
    );
  });

  it('a table left to the cascade has a foreign key to end_users ON DELETE CASCADE', async () => {
    const cascading: Array<{ name: string }> = await dataSource.query(
      `SELECT conrelid::regclass::text AS name FROM pg_constraint
        WHERE contype = 'f' AND confrelid = 'end_users'::regclass AND confdeltype = 'c'`,
    );
    const names = cascading.map((row) => row.name);
    expect(claimed.filter((claim) => claim.cascades && !names.includes(claim.table))).toEqual([]);
  });

  it('erases the idempotency keys after every other table a deletion takes before them', () => {
    // A memory's, a fact's and a personality's deletion lock the keys last: an erasure locking
    // them before the memories or paused turns deadlocked with those (found by review).
    const order = t.app.get(ErasureParticipants).inOrder.map((participant) => participant.name);
    const keys = order.indexOf('IdempotencyService.forgetEndUsers');
    for (const before of [
      'FactsRepository.eraseEndUsers',
      'MemoriesRepository.eraseEndUsers',
      'ToolTurnsService.eraseEndUsers',
      'AuditService.redactErasedEndUsers',
    ]) {
      const at = order.indexOf(before);
      expect({ before, runsBefore: at >= 0 && at < keys }).toEqual({ before, runsBefore: true });
    }
  });

  it("docs/data-plane.md names every claimed table in its list of where an end user's data lives", () => {
    const section = dataPlaneDocsTable();
    expect(claimed.filter((claim) => !section.includes(`\`${claim.table}\``))).toEqual([]);
  });
});
