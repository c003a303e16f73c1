/** The UTC day of `at`, YYYY-MM-DD, as the tables key their days. */
export function utcDay(at: Date): string {
  return at.toISOString().slice(0, 10);
}

/** The next UTC midnight after `at`: when a day's count starts over. */
export function nextUtcDay(at: Date): Date {
  return new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));
}

/** Whole seconds from `atMs` to the next UTC midnight, at least 1: a daily cap's Retry-After. */
export function secondsToNextUtcDay(atMs: number): number {
  return Math.max(1, Math.ceil((nextUtcDay(new Date(atMs)).getTime() - atMs) / 1000));
}
