/**
 * True for PostgreSQL's "canceling statement due to statement timeout" (SQLSTATE 57014), as the
 * pg driver or TypeORM's QueryFailedError carry it: DATABASE_STATEMENT_TIMEOUT_MS, or a
 * narrower budget such as MEMORY_RECALL_TIMEOUT_MS, ran out.
 */
export function isStatementTimeout(error: unknown): boolean {
  return (
    typeof error === 'object' && error !== null && (error as { code?: unknown }).code === '57014'
  );
}
