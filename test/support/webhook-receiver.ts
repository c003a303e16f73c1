import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface ReceivedWebhook {
  /** The path the endpoint URL named (the receiver's behaviour). */
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
  receivedAt: number;
}

/**
 * A real HTTP receiver on loopback, standing in for a customer's endpoint. The path of the URL
 * chooses how it answers:
 * - `/ok/…`: 200 at once;
 * - `/fail/…`: 500;
 * - `/slow/<ms>/…`: 200 after `<ms>` milliseconds;
 * - `/hang/…`: never answers (the connection stays open);
 * - `/redirect/…`: 302 to `/ok/redirected`;
 * - `/flaky/<n>/…`: 500 for the first `<n>` requests of each webhook-id, then 200;
 * - `/tool/…`: a webhook tool's answer, `{"output": {"echo": <the call's arguments>}}`;
 * - `/tool-slow/<ms>/…`: the same after `<ms>` milliseconds;
 * - `/tool-big/…`: a webhook tool's answer whose output is over 16 KiB;
 * - `/tool-nul/…`: a webhook tool's answer whose output holds U+0000 (as JSON's escape);
 * - `/tool-deep/…`: a webhook tool's answer whose output nests 8,000 arrays (16,000 bytes);
 * - `/tool-long-key/…`: a webhook tool's answer whose output holds a key of 1,100 characters;
 * - `/tool-proto-key/…`: a webhook tool's answer whose output holds a `__proto__` key;
 * - `/tool-infinite/…`: a webhook tool's answer whose output holds `1e999`, which parses as Infinity;
 * - `/held/…`: a webhook tool's answer as `/tool/…` gives it, once the spec releases the path
 *   (`release`); until then none (the connection stays open), so the call is in flight for as
 *   long as the spec needs, not for a time it has to outrun.
 * Every request is kept, with its headers, raw body and arrival time.
 */
export class WebhookReceiver {
  readonly received: ReceivedWebhook[] = [];
  private readonly server: Server;
  private readonly sockets = new Set<Socket>();
  private readonly seen = new Map<string, number>();
  private waiters: Array<() => void> = [];
  /** `/held/…` requests not answered yet whose connection is open, each with its answer. */
  private readonly holding = new Set<{ path: string; answer: () => void }>();
  /** Path prefixes released: their `/held/…` requests are answered, now and on arrival. */
  private readonly released: string[] = [];

  constructor() {
    this.server = createServer((request, response) => this.handle(request, response));
    this.server.on('connection', (socket) => {
      this.sockets.add(socket);
      socket.on('close', () => this.sockets.delete(socket));
    });
  }

  async start(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return this;
  }

  get port(): number {
    return (this.server.address() as AddressInfo).port;
  }

  /** A URL of this receiver answering as `behaviour` says (e.g. `ok/a`, `slow/300/b`). */
  url(behaviour: string, host = '127.0.0.1'): string {
    return `http://${host}:${this.port}/${behaviour}`;
  }

  /** Requests whose path starts with `prefix`. */
  at(prefix: string): ReceivedWebhook[] {
    return this.received.filter((hook) => hook.path.startsWith(prefix));
  }

  /** Resolves once `done()` holds (checked at every request), or rejects after `timeoutMs`. */
  async waitFor(done: () => boolean, timeoutMs = 15_000, what = 'webhooks'): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (!done()) {
      const left = deadline - Date.now();
      if (left <= 0)
        throw new Error(`timed out waiting for ${what} (${this.received.length} received)`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 200));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /**
   * Requests at `/held/…` paths starting with `prefix` that are still held: not answered yet and
   * their connection open (a caller that gave up, its timeout passed, closed it).
   */
  heldAt(prefix: string): number {
    return [...this.holding].filter((held) => held.path.startsWith(prefix)).length;
  }

  /** Answers the `/held/…` requests whose path starts with `prefix`, and those that come later. */
  release(prefix: string): void {
    this.released.push(prefix);
    for (const held of [...this.holding]) {
      if (held.path.startsWith(prefix)) held.answer();
    }
  }

  async stop(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      this.received.push({
        path,
        headers: request.headers,
        body: Buffer.concat(chunks).toString('utf8'),
        receivedAt: Date.now(),
      });
      for (const wake of this.waiters.splice(0)) wake();
      const [, behaviour, argument] = path.split('/');
      const id = String(request.headers['webhook-id']);
      const count = (this.seen.get(`${path} ${id}`) ?? 0) + 1;
      this.seen.set(`${path} ${id}`, count);
      switch (behaviour) {
        case 'fail':
          response.writeHead(500).end('no');
          return;
        case 'slow':
          setTimeout(() => response.writeHead(200).end('ok'), Number(argument)).unref();
          return;
        case 'hang':
          return;
        case 'redirect':
          response.writeHead(302, { location: `/ok/redirected` }).end();
          return;
        case 'tool':
        case 'tool-slow': {
          const { data } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            data: { arguments: unknown };
          };
          const answer = () =>
            response
              .writeHead(200, { 'content-type': 'application/json' })
              .end(JSON.stringify({ output: { echo: data.arguments } }));
          if (behaviour === 'tool') answer();
          else setTimeout(answer, Number(argument)).unref();
          return;
        }
        case 'held': {
          const { data } = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
            data: { arguments: unknown };
          };
          const held = {
            path,
            answer: () => {
              this.holding.delete(held);
              response
                .writeHead(200, { 'content-type': 'application/json' })
                .end(JSON.stringify({ output: { echo: data.arguments } }));
            },
          };
          if (this.released.some((prefix) => path.startsWith(prefix))) {
            held.answer();
            return;
          }
          this.holding.add(held);
          response.on('close', () => this.holding.delete(held));
          return;
        }
        case 'tool-big':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ output: 'x'.repeat(16 * 1024) }));
          return;
        case 'tool-deep':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end(`{"output": ${'['.repeat(8_000)}${']'.repeat(8_000)}}`);
          return;
        case 'tool-long-key':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end(JSON.stringify({ output: { ['k'.repeat(1_100)]: 1 } }));
          return;
        case 'tool-proto-key':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end('{"output": {"shipment": {"__proto__": {"admin": true}}}}');
          return;
        case 'tool-infinite':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end('{"output": {"stock": [3, 1e999]}}');
          return;
        case 'tool-nul':
          response
            .writeHead(200, { 'content-type': 'application/json' })
            .end('{"output": {"status": "shipped\\u0000"}}');
          return;
        case 'flaky':
          response.writeHead(count <= Number(argument) ? 500 : 200).end();
          return;
        default:
          response.writeHead(200).end('ok');
      }
    });
  }
}
