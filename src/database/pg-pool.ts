import type { Pool } from 'pg';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/**
 * The pg pool under TypeORM's DataSource. Hot paths (end-user create, respond) send their SQL
 * straight to it: one round trip, no QueryRunner set-up and no entity hydration per request.
 */
export function poolOf(dataSource: DataSource): Pool {
  return (dataSource.driver as PostgresDriver).master as Pool;
}

/**
 * One or more entries of a WITH list, owned by the module whose table they write, with their
 * parameters numbered from the `firstParam` they were built for. Several modules' steps make one
 * statement (see `withSteps`): one statement is one transaction in one round trip.
 */
export interface SqlStep {
  sql: string;
  params: unknown[];
}

/** A builder of a step, given the number of its first parameter. */
export type StepBuilder = (firstParam: number) => SqlStep;

/** `WITH step, step, … <final>`: the steps numbered one after another. */
export function withSteps(steps: StepBuilder[], final: string): SqlStep {
  const parts: string[] = [];
  const params: unknown[] = [];
  for (const build of steps) {
    const step = build(params.length + 1);
    parts.push(step.sql);
    params.push(...step.params);
  }
  return { sql: `WITH ${parts.join(',\n')}\n${final}`, params };
}
