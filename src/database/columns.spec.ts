import { Columns, type RowOf } from './columns';
import type { Database } from './database';
import { sql } from './sql';

class Account {
  id!: string;
  userId!: string;
  eraseAfter!: Date | null;
}

describe('Columns', () => {
  const ACCOUNT = Columns.rowOf<Account>()('id', 'userId', 'eraseAfter');

  it('writes the list of an entity’s columns, snake_cased, optionally qualified', () => {
    expect(ACCOUNT.text).toBe('id, user_id, erase_after');
    expect(Columns.rowOf<Account>('a')('userId').text).toBe('a.user_id');
  });

  it('aliases columns to the entity’s properties where their names differ', () => {
    expect(Columns.propertiesOf<Account>('a')('id', 'userId').text).toBe(
      'a.id, a.user_id AS "userId"',
    );
  });

  it('names computed expressions by the row’s keys, their values still parameters', () => {
    const computed = Columns.computed<{ overdue: boolean; total: number }>({
      overdue: sql`erase_after < ${new Date(0)}`,
      total: sql`count(*)`,
    });
    const statement = computed.query`SELECT ${computed} FROM end_users WHERE id = ${'x'}`;
    expect(statement.text).toBe(
      'SELECT erase_after < $1 AS "overdue", count(*) AS "total" FROM end_users WHERE id = $2',
    );
    expect(statement.values).toEqual([new Date(0), 'x']);
  });

  it('joins two lists into one row', () => {
    const both = ACCOUNT.and(Columns.computed<{ n: number }>({ n: sql`1` }));
    expect(both.text).toBe('id, user_id, erase_after, 1 AS "n"');
  });

  it('types a statement by its columns, and refuses one that does not hold them', () => {
    const statement = ACCOUNT.query`SELECT ${ACCOUNT} FROM end_users WHERE id = ${'x'}`;
    expect(statement.text).toBe('SELECT id, user_id, erase_after FROM end_users WHERE id = $1');
    expect(() => ACCOUNT.query`SELECT id FROM end_users`).toThrow(/does not hold its columns/);
    // A plain `sql` piece writes the list too, but is not typed by it.
    expect(sql`RETURNING ${ACCOUNT}`.text).toBe('RETURNING id, user_id, erase_after');
  });

  // The claim is the typecheck's (`npm run typecheck` fails on an unused @ts-expect-error); at
  // run time the row goes through as the driver gave it.
  it('gives Database#row the row type, so a column not selected fails the typecheck', async () => {
    const typed = async (database: Database) => {
      const row = await database.row(ACCOUNT.query`SELECT ${ACCOUNT} FROM end_users`);
      const answer: RowOf<typeof ACCOUNT> | undefined = row;
      // @ts-expect-error created_at is not among the columns
      return [answer?.user_id, row?.created_at];
    };
    const driverRow = { user_id: 'user-1' };
    const database = { row: () => Promise.resolve(driverRow) } as unknown as Database;
    await expect(typed(database)).resolves.toEqual(['user-1', undefined]);
  });
});
