import type { Row } from './row';
import { Cte, cte, empty, join, raw, type Source, sql, withEntries } from './sql';

describe('sql', () => {
  it('numbers the parameters of the finished statement, nested pieces included', () => {
    const inner = sql`b = ${2} AND c = ${3}`;
    const statement = sql`SELECT * FROM t WHERE a = ${1} AND ${inner} AND d = ${4}`;
    expect(statement.text).toBe('SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 AND d = $4');
    expect(statement.values).toEqual([1, 2, 3, 4]);
  });

  it('keeps values out of the text, whatever they hold', () => {
    const hostile = "'; DROP TABLE end_users; --";
    const statement = sql`SELECT ${hostile}::text`;
    expect(statement.text).toBe('SELECT $1::text');
    expect(statement.values).toEqual([hostile]);
  });

  it('gives the same text for the same shape, so a named statement can carry it', () => {
    const shape = (value: string) => sql`SELECT ${value}, ${sql`${value.length}`}`;
    expect(shape('a').text).toBe(shape('a longer value').text);
  });

  it('stays equal to an equal statement once its text has been read', () => {
    const read = sql`SELECT ${1}, ${sql`${'a'}`}`;
    const unread = sql`SELECT ${1}, ${sql`${'a'}`}`;
    // Read twice, as a statement is (its name, then pg): the second read finds the built text.
    expect(read.text).toBe('SELECT $1, $2');
    expect(read.text).toBe('SELECT $1, $2');
    expect(read).toEqual(unread);
  });

  it("gives its text to a copy of itself, as pg's query config copy reads it", () => {
    const statement = sql`SELECT ${1}`;
    expect(statement.text).toBe('SELECT $1');
    const copy = Object.defineProperties(
      Object.create(Object.getPrototypeOf(statement) as object) as typeof statement,
      Object.getOwnPropertyDescriptors(statement),
    );
    expect(copy.text).toBe('SELECT $1');
  });

  it('joins pieces and values; raw text and empty take no parameter', () => {
    expect(join([sql`a = ${1}`, sql`b = ${2}`], ' AND ').text).toBe('a = $1 AND b = $2');
    expect(join([1, 2, 3]).text).toBe('$1, $2, $3');
    expect(join([]).text).toBe('');
    expect(sql`SELECT ${raw('id')} FROM t${empty}`.text).toBe('SELECT id FROM t');
  });

  it('composes a WITH statement whose steps read the columns a CTE lends them', () => {
    const created = cte(
      'created',
      { webhook_data: sql`jsonb_build_object('id', id)` },
      (lent) => sql`INSERT INTO t (a) VALUES (${'x'}) RETURNING id, ${lent}`,
    );
    const step = (source: Source<'webhook_data'>) =>
      new Cte(
        `${source.name}_event`,
        sql`INSERT INTO e (data) SELECT webhook_data FROM ${source.ref}`,
      );
    const statement = withEntries(
      [created, step(created)],
      sql`SELECT id FROM ${created.ref} WHERE ${true}`,
    );
    expect(statement.text).toBe(
      `WITH created AS (INSERT INTO t (a) VALUES ($1) RETURNING id, jsonb_build_object('id', id) AS webhook_data),\n` +
        `created_event AS (INSERT INTO e (data) SELECT webhook_data FROM created)\n` +
        'SELECT id FROM created WHERE $2',
    );
    expect(statement.values).toEqual(['x', true]);
  });

  it('refuses, at compile time, a step on a source without the columns it reads', () => {
    const step = (source: Source<'audit_target_id' | 'audit_details'>) => source.name;
    const lacking = new Cte('lacking', sql`SELECT 1`, ['audit_target_id']);
    const enough = new Cte('enough', sql`SELECT 1`, ['audit_target_id', 'audit_details', 'more']);
    // @ts-expect-error audit_details is missing
    expect(step(lacking)).toBe('lacking');
    expect(step(enough)).toBe('enough');
  });

  it('types rows from entities, with the columns snake_cased', () => {
    class Entity {
      userId!: string;
      eraseAfter!: Date | null;
      id!: string;
    }
    const row: Row<Entity, 'id' | 'userId' | 'eraseAfter'> = {
      id: 'a',
      user_id: 'b',
      erase_after: null,
    };
    // @ts-expect-error the property, not its column, is not a column name
    const wrong: Row<Entity, 'userId'> = { userId: 'b' };
    expect([row, wrong]).toHaveLength(2);
  });
});
