/**
 * Each statement's text, built on its first read: it is read for the statement's name and again
 * for pg. Kept beside the statement, not in it: two equal statements stay equal to deep
 * comparison, and pg's copy of a query config (its own properties, the same prototype) still
 * reads its text.
 */
const builtTexts = new WeakMap<Sql, string>();

/**
 * SQL as values: a tagged template keeps text and parameters together, pieces nest, and only
 * the finished statement numbers its parameters ($1, $2, …). No hand-numbered `$n`, no string
 * concatenation of values. See docs/database.md.
 *
 * ```ts
 * const byUser = sql`user_id = ${userId}`;
 * database.rows(sql`SELECT id FROM end_users WHERE organization_id = ${orgId} AND ${byUser}`);
 * ```
 */
export class Sql<Answer = unknown> {
  /**
   * Phantom: the row the statement answers, when a Columns declaration built it (Columns#query);
   * `unknown` for any other piece, which Database#rows cannot type.
   */
  declare readonly answers?: Answer;

  /** `strings.length === values.length + 1`, as in a template literal. */
  protected constructor(
    readonly strings: readonly string[],
    readonly values: readonly unknown[],
  ) {}

  /** Flattens nested pieces, so that numbering is one pass over plain values. */
  static of(strings: readonly string[], inserted: readonly unknown[]): Sql {
    const outStrings = [strings[0]];
    const outValues: unknown[] = [];
    inserted.forEach((value, index) => {
      const next = strings[index + 1];
      if (value instanceof Sql) {
        outStrings[outStrings.length - 1] += value.strings[0];
        for (let i = 0; i < value.values.length; i += 1) {
          outValues.push(value.values[i]);
          outStrings.push(value.strings[i + 1]);
        }
        outStrings[outStrings.length - 1] += next;
      } else {
        outValues.push(value);
        outStrings.push(next);
      }
    });
    return new Sql(outStrings, outValues);
  }

  /** The text with `$1`…`$n`: the same for every statement of the same shape. */
  get text(): string {
    let text = builtTexts.get(this);
    if (text === undefined) {
      text = this.strings[0];
      for (let i = 1; i < this.strings.length; i += 1) text += `$${i}${this.strings[i]}`;
      builtTexts.set(this, text);
    }
    return text;
  }
}

export function sql(strings: TemplateStringsArray, ...values: unknown[]): Sql {
  return Sql.of(strings, values);
}

/** Text taken as SQL, never a value: identifiers and keywords written in the code, not input. */
export function raw(text: string): Sql {
  return Sql.of([text], []);
}

export const empty = raw('');

/** Pieces (or values, as parameters) with a separator between them. */
export function join(pieces: readonly unknown[], separator = ', '): Sql {
  if (pieces.length === 0) return empty;
  return Sql.of(['', ...Array<string>(pieces.length - 1).fill(separator), ''], pieces);
}

/**
 * A row source of a composed statement (a CTE) that is known to carry the columns `C`. A step
 * that another module lends asks for the columns it reads (`Source<'webhook_data'>`), and the
 * statement's own CTE declares the ones it returns, so a renamed column on either side fails
 * the typecheck instead of the statement.
 */
export interface Source<C extends string> {
  /** The CTE's name: steps reading it name their own CTEs after it. */
  readonly name: string;
  /** The CTE's name, as SQL. */
  readonly ref: Sql;
  /** Phantom: which columns the rows carry. A source with more columns fits a step needing fewer. */
  readonly columns: { readonly [K in C]: true };
}

/** One CTE, `name AS (…)`: an entry of a WITH list and a Source of its declared columns. */
export class Cte<C extends string = never> implements Source<C> {
  readonly ref: Sql;
  readonly columns: { readonly [K in C]: true };

  constructor(
    readonly name: string,
    readonly body: Sql,
    columns: readonly C[] = [],
  ) {
    this.ref = raw(name);
    this.columns = Object.fromEntries(columns.map((column) => [column, true])) as {
      [K in C]: true;
    };
  }

  get definition(): Sql {
    return sql`${this.ref} AS (${this.body})`;
  }
}

/** `expression AS column, …` for each entry: the columns a CTE lends to other modules' steps. */
export function columnsAs<C extends string>(columns: Record<C, Sql>): Sql {
  return join(
    Object.entries<Sql>(columns).map(([name, expression]) => sql`${expression} AS ${raw(name)}`),
  );
}

/**
 * A CTE whose body ends with the lent columns, e.g. `RETURNING id, ${lent}` or `SELECT …,
 * ${lent}`: the columns are written once, by name, and the Cte is typed by them.
 */
export function cte<C extends string>(
  name: string,
  columns: Record<C, Sql>,
  body: (lent: Sql) => Sql,
): Cte<C> {
  return new Cte(name, body(columnsAs(columns)), Object.keys(columns) as C[]);
}

/** An entry of a WITH list: a CTE, or several written together by the module that owns them. */
export type WithEntry = { readonly definition: Sql } | Sql;

/**
 * `WITH entry, entry, … final`: one statement, so one transaction and one round trip, however
 * many modules' tables it writes.
 */
export function withEntries<Answer>(
  entries: readonly WithEntry[],
  final: Sql<Answer>,
): Sql<Answer> {
  const parts = entries.map((entry) => (entry instanceof Sql ? entry : entry.definition));
  // The statement answers what its final query does.
  return sql`WITH ${join(parts, ',\n')}\n${final}` as Sql<Answer>;
}

/**
 * WITH entries a module writes together (`a AS (…), b AS (…)`) that lend the rows of one of
 * them, `name`, carrying the columns `C`: an entry of the statement and a Source for other
 * modules' steps at once.
 */
export class LendingEntries<C extends string> implements Source<C> {
  readonly ref: Sql;
  readonly columns: { readonly [K in C]: true };

  constructor(
    readonly definition: Sql,
    readonly name: string,
    columns: readonly C[],
  ) {
    this.ref = raw(name);
    this.columns = Object.fromEntries(columns.map((column) => [column, true])) as {
      [K in C]: true;
    };
  }
}
