/** `erasedAt` → `erased_at`: a property of an entity as its column is named. */
export type SnakeCase<S extends string> = S extends `${infer Head}${infer Tail}`
  ? `${Head extends Lowercase<Head> ? Head : `_${Lowercase<Head>}`}${SnakeCase<Tail>}`
  : S;

/**
 * A row as raw SQL answers it, typed from the entity that describes the table: `Row<EndUser,
 * 'id' | 'userId'>` is `{ id: string; user_id: string }`. The entity stays the one description
 * of the table in TypeScript; a renamed property fails every row built from it.
 */
export type Row<Entity, Keys extends keyof Entity & string> = {
  [Key in Keys as SnakeCase<Key>]: Entity[Key];
};
