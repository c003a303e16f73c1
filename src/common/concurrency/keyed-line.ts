/** The work of one key: how much is running or waiting, and when the last queued has ended. */
interface Line {
  inLine: number;
  last: Promise<void>;
}

/**
 * Lines of work by key (an organization), one at a time per key on this instance, first come
 * first served: work that must not overlap for one tenant waits here, holding nothing (no pooled
 * connection, no lock), while other keys' work goes on.
 */
export class KeyedLine {
  private readonly lines = new Map<string, Line>();

  /**
   * `work` once every earlier work of `key` has ended. When `signal` aborts (its client went)
   * before the turn comes, it leaves the line at once and the signal's reason is thrown; the work
   * behind it still waits for the work ahead of it.
   */
  async run<T>(key: string, work: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    const line = this.lines.get(key) ?? { inLine: 0, last: Promise.resolve() };
    let ended!: () => void;
    const before = line.last;
    line.last = new Promise<void>((resolve) => (ended = resolve));
    line.inLine += 1;
    this.lines.set(key, line);
    let leftEarly = false;
    try {
      leftEarly = await aborts(before, signal);
      if (leftEarly) throw signal!.reason;
      return await work();
    } finally {
      if (leftEarly) void before.then(ended);
      else ended();
      line.inLine -= 1;
      if (line.inLine === 0) this.lines.delete(key);
    }
  }

  /** The work of `key` running or waiting here. */
  size(key: string): number {
    return this.lines.get(key)?.inLine ?? 0;
  }
}

/** Waits for `turn`; true if `signal` aborted first (or already had). */
function aborts(turn: Promise<void>, signal: AbortSignal | undefined): Promise<boolean> {
  if (!signal) return turn.then(() => false);
  if (signal.aborted) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const onAbort = () => resolve(true);
    signal.addEventListener('abort', onAbort, { once: true });
    void turn.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    });
  });
}
