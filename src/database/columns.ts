import { join, raw, Sql } from './sql';
import type { Row } from './row';

/** The row a Columns declaration makes: `RowOf<typeof COLUMNS>`. */
export type RowOf<C> = C extends Columns<infer Answer> ? Answer : never;

/** `erasedAt` → `erased_at`, as SnakeCase<'erasedAt'> types it. */
export function snakeCase(property: string): string {
  return property.replace(/[A-Z]/g, (letter) => `_${letter.toLowerCase()}`);
}

/**
 * A SELECT (or RETURNING) list and the row it answers, declared once: the list is written from
 * the declaration, so a column the type names is a column the statement selects, and a
 * statement built with `query` is typed by it (docs/database.md, rule 3). It is SQL itself: `${columns}`
 * in a statement writes the list.
 */
export class Columns<Answer> extends Sql {
  /** Phantom: the row these columns make. */
  declare readonly selects?: Answer;

  private constructor(list: Sql) {
    super(list.strings, list.values);
  }

  /** The columns of an entity, as raw SQL answers them (snake_case): `Row<Entity, Keys>`. */
  static rowOf<Entity>(
    alias?: string,
  ): <Keys extends keyof Entity & string>(...properties: Keys[]) => Columns<Row<Entity, Keys>> {
    const prefix = alias ? `${alias}.` : '';
    return (...properties) =>
      new Columns(raw(properties.map((property) => prefix + snakeCase(property)).join(', ')));
  }

  /**
   * The columns of an entity aliased to its properties (`user_id AS "userId"`), as the entity
   * holds them: `Pick<Entity, Keys>`.
   */
  static propertiesOf<Entity>(
    alias?: string,
  ): <Keys extends keyof Entity & string>(...properties: Keys[]) => Columns<Pick<Entity, Keys>> {
    const prefix = alias ? `${alias}.` : '';
    return (...properties) =>
      new Columns(
        raw(
          properties
            .map((property) => {
              const column = prefix + snakeCase(property);
              return snakeCase(property) === property ? column : `${column} AS "${property}"`;
            })
            .join(', '),
        ),
      );
  }

  /**
   * Expressions named by the answer's keys (`expression AS key`), for what a statement computes.
   * The expressions' SQL types are the author's word, as with any driver; their names are not.
   */
  static computed<Answer>(expressions: { [Key in keyof Answer & string]: Sql }): Columns<Answer> {
    const named = Object.entries<Sql>(expressions).map(([name, expression]) =>
      Sql.of(['', ` AS "${name}"`], [expression]),
    );
    return new Columns(join(named));
  }

  /** Both lists, in order: the row holds both's columns. */
  and<More>(more: Columns<More>): Columns<Answer & More> {
    return new Columns(join([this, more]));
  }

  /**
   * A statement that selects (or returns) these columns, typed by them: a tagged template like
   * `sql`, which must hold the columns (`${columns}`).
   */
  query(strings: TemplateStringsArray, ...values: unknown[]): Sql<Answer> {
    if (!values.includes(this)) {
      throw new Error('Columns#query: the statement does not hold its columns');
    }
    return Sql.of(strings, values) as Sql<Answer>;
  }
}
