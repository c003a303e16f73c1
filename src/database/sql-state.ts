/** The error's code, as TypeORM wraps the driver's error or as the driver throws it. */
function codeOf(error: unknown): unknown {
  const cause = (error as { driverError?: unknown } | null)?.driverError ?? error;
  return (cause as { code?: unknown } | null)?.code;
}

/** An error PostgreSQL reported (it has a SQLSTATE), as against a connection lost on the way. */
export function hasSqlState(error: unknown): boolean {
  const code = codeOf(error);
  // Five characters, e.g. 57014; a socket's ECONNRESET is a code too, but not PostgreSQL's.
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

/** A unique constraint refused the statement (23505). */
export function isUniqueViolation(error: unknown): boolean {
  return codeOf(error) === '23505';
}

/**
 * PostgreSQL rolled the transaction back whole to end a cycle of waits (40P01): running it
 * again is safe.
 */
export function isDeadlock(error: unknown): boolean {
  return codeOf(error) === '40P01';
}
