import { Transform, type TransformCallback } from 'node:stream';

/** The end of a server-sent event stream: the `done` event's JSON, or nothing to store. */
export type StreamOutcome = { kind: 'done'; data: string } | { kind: 'none' };

/** Past this much text without a complete event, the stream is not watched further. */
const MAX_PENDING_CHARS = 2 * 1024 * 1024;

/**
 * Passes a `text/event-stream` body through unchanged while watching for its final event
 * (contract §15: `event: done` with the same JSON a non-streamed call answers, or `event: error`).
 * The chunk that completes the `done` event is held until `onOutcome` has settled, so the key is
 * marked done before the client can see the answer. A stream that ends, fails or is abandoned
 * without `done` reports `none`. `onOutcome` is called exactly once.
 */
export class FinalEventWatcher extends Transform {
  private pending = '';
  private reported = false;

  constructor(private readonly onOutcome: (outcome: StreamOutcome) => Promise<void>) {
    super();
  }

  override _transform(
    chunk: Buffer | string,
    _encoding: string,
    callback: TransformCallback,
  ): void {
    const outcome = this.reported ? undefined : this.scan(chunk.toString());
    if (!outcome) return callback(null, chunk);
    this.report(outcome)
      .then(() => callback(null, chunk))
      .catch(() => callback(null, chunk));
  }

  override _flush(callback: TransformCallback): void {
    void this.report({ kind: 'none' }).finally(() => callback());
  }

  override _destroy(error: Error | null, callback: (error: Error | null) => void): void {
    void this.report({ kind: 'none' });
    callback(error);
  }

  /** The outcome completed by this chunk, if any. */
  private scan(text: string): StreamOutcome | undefined {
    this.pending += text;
    let end: number;
    while ((end = this.pending.indexOf('\n\n')) !== -1) {
      const block = this.pending.slice(0, end);
      this.pending = this.pending.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      if (event === 'done') {
        const data = /^data: (.*)$/m.exec(block)?.[1];
        return data === undefined ? { kind: 'none' } : { kind: 'done', data };
      }
      if (event === 'error') return { kind: 'none' };
    }
    if (this.pending.length > MAX_PENDING_CHARS) return { kind: 'none' };
    return undefined;
  }

  private report(outcome: StreamOutcome): Promise<void> {
    if (this.reported) return Promise.resolve();
    this.reported = true;
    this.pending = '';
    return this.onOutcome(outcome).catch(() => undefined);
  }
}
