import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** Resolves on `drain` or `close`, leaving no listener behind (a race of two `once` would). */
function drainOrClose(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.on('drain', done);
    response.on('close', done);
  });
}

/**
 * An OpenAI-compatible streamed Chat Completions endpoint for bench/scenarios/stream-backpressure.ts
 * that streams one very long reply in token-sized pieces as fast as the service takes them, and
 * waits (`drain`) when it does not: a provider behind a TCP connection the service stopped reading.
 * test/support/fake-openai.ts writes its pieces in one synchronous recursion (a stack overflow
 * beyond about 10,000 pieces) or one timer each (a millisecond or more apiece), so it cannot send
 * megabytes of 4-character pieces; this one can. It counts what it wrote to each request.
 */
export class StreamingProvider {
  /** Characters of content written to each request so far, in arrival order. */
  readonly written: number[] = [];
  private readonly open = new Set<ServerResponse>();

  private constructor(
    private readonly server: Server,
    private readonly content: string,
    private readonly pieceCharacters: number,
  ) {}

  /** `content`: the whole reply as the model writes it (the service's JSON object). */
  static async start(content: string, pieceCharacters: number): Promise<StreamingProvider> {
    const server = createServer();
    const provider = new StreamingProvider(server, content, pieceCharacters);
    server.on('request', (request, response) => {
      request.resume();
      request.on('end', () => void provider.stream(response));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return provider;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/v1`;
  }

  /** Characters written to all requests so far. */
  get total(): number {
    return this.written.reduce((sum, n) => sum + n, 0);
  }

  async close(): Promise<void> {
    for (const response of this.open) response.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async stream(response: ServerResponse): Promise<void> {
    const index = this.written.push(0) - 1;
    this.open.add(response);
    response.on('close', () => this.open.delete(response));
    const base = { id: `chatcmpl-bench-${index}`, object: 'chat.completion.chunk', created: 0 };
    const chunk = (delta: Record<string, unknown>, finish: string | null = null) =>
      `data: ${JSON.stringify({ ...base, model: 'gpt-bench', choices: [{ index: 0, delta, finish_reason: finish }] })}\n\n`;
    response.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' });
    response.write(chunk({ role: 'assistant', content: '' }));
    for (let at = 0; at < this.content.length; at += this.pieceCharacters) {
      if (response.destroyed) return;
      const piece = this.content.slice(at, at + this.pieceCharacters);
      this.written[index] += piece.length;
      if (!response.write(chunk({ content: piece }))) {
        await drainOrClose(response);
      } else if (at % (this.pieceCharacters * 256) === 0) {
        // Let the bench's own clients and timers run between bursts.
        await new Promise((resolve) => setImmediate(resolve));
      }
    }
    if (response.destroyed) return;
    response.write(chunk({}, 'stop'));
    response.end('data: [DONE]\n\n');
  }
}
