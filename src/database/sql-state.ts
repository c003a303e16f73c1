/** An error PostgreSQL reported (it has a SQLSTATE), as against a connection lost on the way. */
export function hasSqlState(error: unknown): boolean {
  const cause = (error as { driverError?: unknown } | null)?.driverError ?? error;
  const code = (cause as { code?: unknown } | null)?.code;
  // Five characters, e.g. 57014; a socket's ECONNRESET is a code too, but not PostgreSQL's.
  return typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

/** A unique constraint refused the statement (23505). */
export function isUniqueViolation(error: unknown): boolean {
  const cause = (error as { driverError?: unknown } | null)?.driverError ?? error;
  return (cause as { code?: unknown } | null)?.code === '23505';
}
