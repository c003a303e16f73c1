import { StreamableFile } from '@nestjs/common';
import { once } from 'node:events';
import { PassThrough } from 'node:stream';

/**
 * Output a stream holds for a client that does not read before its producer waits (contract
 * §25): half in the writable side, half in the readable side of the PassThrough, on top of what
 * the socket itself buffers.
 */
export const STREAM_BUFFER_BYTES = 1024 * 1024;

/**
 * A `text/event-stream` body being written: `event: <name>` / `data: <JSON>` blocks. `send`
 * resolves once the body has room again, so a producer that awaits it (a provider's stream)
 * pauses while the client does not read, instead of buffering without bound.
 */
export class ServerSentEvents {
  readonly stream = new PassThrough({
    writableHighWaterMark: STREAM_BUFFER_BYTES / 2,
    readableHighWaterMark: STREAM_BUFFER_BYTES / 2,
  });

  async send(event: string, data: unknown): Promise<void> {
    // JSON has no raw newlines, so one `data:` line carries the whole payload.
    await this.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** A comment line: keeps the connection visibly alive while nothing else is to be said. */
  comment(text: string): void {
    if (this.closed) return;
    // Small and rare: written even when the buffer is full, never awaited.
    this.stream.write(`: ${text}\n\n`);
  }

  end(): void {
    if (!this.stream.writableEnded) this.stream.end();
  }

  private get closed(): boolean {
    return this.stream.writableEnded || this.stream.destroyed;
  }

  private async write(text: string): Promise<void> {
    if (this.closed) return;
    if (this.stream.write(text)) return;
    // Full: wait for the client to read (or for the stream to be cut: idle timeout, client gone).
    // Whichever comes first, the other listener goes too: a long stream waits thousands of times.
    const settled = new AbortController();
    const { signal } = settled;
    try {
      await Promise.race([
        once(this.stream, 'drain', { signal }),
        once(this.stream, 'close', { signal }),
      ]);
    } finally {
      settled.abort();
    }
  }
}

/**
 * A `text/event-stream` response produced by `produce`: headers go out at once, then a comment
 * every `keepAliveMs` while nothing else is said, so a slow producer's first event meets its own
 * deadline rather than an idle cut; the body ends when `produce` settles (it reports its own
 * failures as events; one it lets through only ends the stream).
 */
export function eventStream(
  keepAliveMs: number,
  produce: (events: ServerSentEvents) => Promise<void>,
): StreamableFile {
  const events = new ServerSentEvents();
  events.comment('ok');
  const keepAlive = setInterval(() => events.comment('ping'), keepAliveMs);
  produce(events)
    .catch(() => undefined)
    .finally(() => {
      clearInterval(keepAlive);
      events.end();
    });
  return new StreamableFile(events.stream, { type: 'text/event-stream; charset=utf-8' });
}
