/** What a wait for a slot may meet: the refusals are the caller's (a 429 of its own wording). */
export interface SlotWait {
  /** How long the caller may wait; past it `tooLong()` is thrown. */
  timeoutMs: number;
  /** Aborted when the caller goes: it leaves the queue, and the signal's reason is thrown. */
  signal?: AbortSignal;
  /** Thrown at once when `maxWaiting` callers already wait. */
  full: () => Error;
  tooLong: () => Error;
}

/**
 * `size` slots of one process, handed out first come first served. A waiter holds whatever its
 * request holds (a body in memory, a client's patience), so neither the queue nor a wait is
 * unbounded: at most `maxWaiting` wait, each no longer than its `timeoutMs`.
 */
export class Slots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  constructor(
    private readonly size: number,
    private readonly maxWaiting: number,
  ) {}

  /** Runs `work` in a slot, and gives the slot back however it ends. */
  async run<T>(wait: SlotWait, work: () => Promise<T>): Promise<T> {
    await this.take(wait);
    try {
      return await work();
    } finally {
      this.release();
    }
  }

  private async take({ timeoutMs, signal, full, tooLong }: SlotWait): Promise<void> {
    signal?.throwIfAborted();
    if (this.running < this.size) {
      this.running += 1;
      return;
    }
    if (this.waiting.length >= this.maxWaiting) throw full();
    // The slot is handed over by release(), so `running` stays counted meanwhile.
    await new Promise<void>((resolve, reject) => {
      const handedOver = () => {
        stopWaiting();
        resolve();
      };
      const giveUp = (error: Error) => {
        const at = this.waiting.indexOf(handedOver);
        if (at >= 0) this.waiting.splice(at, 1);
        stopWaiting();
        reject(error);
      };
      const onAbort = () =>
        giveUp(signal?.reason instanceof Error ? signal.reason : new Error('the caller went'));
      const timer = setTimeout(() => giveUp(tooLong()), timeoutMs);
      const stopWaiting = () => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      this.waiting.push(handedOver);
    });
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.running -= 1;
  }
}
