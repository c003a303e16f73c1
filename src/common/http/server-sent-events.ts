import { PassThrough } from 'node:stream';

/**
 * A `text/event-stream` body being written: `event: <name>` / `data: <JSON>` blocks. Returned to
 * Nest as a StreamableFile, which pipes it to the response and destroys it when the client leaves.
 */
export class ServerSentEvents {
  readonly stream = new PassThrough();

  send(event: string, data: unknown): void {
    if (this.stream.writableEnded || this.stream.destroyed) return;
    // JSON has no raw newlines, so one `data:` line carries the whole payload.
    this.stream.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }

  /** A comment line: keeps the connection visibly alive while nothing else is to be said. */
  comment(text: string): void {
    if (this.stream.writableEnded || this.stream.destroyed) return;
    this.stream.write(`: ${text}\n\n`);
  }

  end(): void {
    if (!this.stream.writableEnded) this.stream.end();
  }
}
