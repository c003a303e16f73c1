/** The UTC day of `at`, as a `date` column holds it (`2031-05-20`). */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** Whole seconds from `atMs` to the next UTC midnight, at least 1: a daily cap's Retry-After. */
export function secondsToNextUtcDay(atMs: number): number {
  const at = new Date(atMs);
  const midnight = Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1);
  return Math.max(1, Math.ceil((midnight - atMs) / 1000));
}
