import type { Pool, PoolClient } from 'pg';
import type { DataSource } from 'typeorm';
import type { PostgresDriver } from 'typeorm/driver/postgres/PostgresDriver';

/**
 * The pg pool under TypeORM's DataSource. Hot paths (end-user create, respond) send their SQL
 * straight to it: one round trip, no QueryRunner set-up and no entity hydration per request.
 */
export function poolOf(dataSource: DataSource): Pool {
  return (dataSource.driver as PostgresDriver).master as Pool;
}

/** Runs `work` in one transaction on one pooled connection; rolls back if it throws. */
export async function withTransaction<T>(
  pool: Pool,
  work: (client: PoolClient) => Promise<T>,
): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(client);
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
