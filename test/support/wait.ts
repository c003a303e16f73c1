/**
 * Waiting in specs. Time that a rule of ours depends on is moved with a ManualClock; work of ours
 * that finishes in the background is awaited or polled with a deadline (`eventually`). A fixed
 * `sleep` is only for a third party's own timer (say which where it is called).
 */

/** A fixed wait: only for a third party's own timer, never for our own work. */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/**
 * Polls `check` until it answers something other than undefined, and answers that; fails after
 * `timeoutMs` with `describe()` (what was awaited, or what was seen instead).
 */
export async function eventually<T>(
  check: () => T | undefined | Promise<T | undefined>,
  describe: string | (() => string) = 'the condition',
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) {
      throw new Error(
        `timed out waiting for ${typeof describe === 'string' ? describe : describe()}`,
      );
    }
    await sleep(50);
  }
}
