/**
 * True for PostgreSQL's "deadlock detected" (SQLSTATE 40P01), as the pg driver or TypeORM's
 * QueryFailedError carry it: the transaction was chosen to end a cycle of waits, and rolled back
 * whole, so running it again is safe.
 */
export function isDeadlock(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '40P01'
  );
}
