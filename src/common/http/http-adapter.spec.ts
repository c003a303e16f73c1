import type { Express, Request, Response } from 'express';
import type { Server } from 'node:http';
import { connect, type Socket } from 'node:net';
import { createHttpAdapter, timeOutUnfinishedRequests } from './http-adapter';

/** A socket to the server, with everything it has been sent so far. */
function client(
  port: number,
  allowHalfOpen = false,
): { socket: Socket; said: () => string; closed: Promise<void> } {
  const socket = connect({ port, host: '127.0.0.1', allowHalfOpen });
  let said = '';
  socket.on('data', (chunk: Buffer) => (said += chunk.toString()));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, said: () => said, closed };
}

const until = async (condition: () => boolean) => {
  for (let waited = 0; !condition() && waited < 5_000; waited += 10) {
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
};

describe('timeOutUnfinishedRequests (a shutdown cutting requests still arriving)', () => {
  let server: Server;
  let adapter: ReturnType<typeof createHttpAdapter>;
  let port: number;
  let handled: string[];

  beforeEach(async () => {
    handled = [];
    adapter = createHttpAdapter({
      requestTimeoutMs: 30_000,
      headersTimeoutMs: 20_000,
      keepAliveTimeoutMs: 30_000,
    });
    adapter.initHttpServer({});
    const app = adapter.getInstance<Express>();
    app.get('/ok', (_request: Request, response: Response) => void response.end('ok'));
    app.get('/slow', (_request: Request, response: Response) => {
      setTimeout(() => response.end('late'), 300);
    });
    app.post('/upload', (request: Request, response: Response) => {
      request.resume();
      request.on('end', () => {
        handled.push('upload');
        response.end('stored');
      });
    });
    server = adapter.getHttpServer();
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    port = (server.address() as { port: number }).port;
  });

  afterEach(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('answers 408 a request whose body is still arriving, and closes it: the rest is never handled', async () => {
    // Half-open: it keeps its side open once the server has ended its own.
    const upload = client(port, true);
    upload.socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345');
    await new Promise((resolve) => setTimeout(resolve, 100));
    timeOutUnfinishedRequests(adapter);
    await until(() => upload.said().length > 0);
    expect(upload.said()).toMatch(/^HTTP\/1\.1 408 /);
    // A client that goes on sending: the request would complete and its handler run.
    upload.socket.write('67890');
    await new Promise((resolve) => setTimeout(resolve, 200));
    upload.socket.destroy();
    expect(handled).toEqual([]);
  });

  it('leaves a request that arrived whole to be answered', async () => {
    const waiting = client(port);
    waiting.socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
    await new Promise((resolve) => setTimeout(resolve, 100));
    timeOutUnfinishedRequests(adapter);
    await until(() => waiting.said().endsWith('late'));
    expect(waiting.said()).toMatch(/^HTTP\/1\.1 200 /);
    expect(waiting.said()).not.toContain('408');
  });

  it('closes keep-alive connections idle since their last answer without a word', async () => {
    const idle = client(port);
    idle.socket.write('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => idle.said().endsWith('ok'));
    const complete = client(port);
    complete.socket.write('POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi');
    await until(() => complete.said().endsWith('stored'));
    const before = [idle.said(), complete.said()];
    timeOutUnfinishedRequests(adapter);
    await idle.closed;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect([idle.said(), complete.said()]).toEqual(before);
    expect(handled).toEqual(['upload']);
  });

  it('answers 408 a request half sent behind one answered on the same connection (pipelined)', async () => {
    const piped = client(port);
    // One write: the second request's first bytes are read with the first, before its answer.
    piped.socket.write('GET /ok HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHo');
    await until(() => piped.said().endsWith('ok'));
    const answered = piped.said();
    timeOutUnfinishedRequests(adapter);
    await piped.closed;
    expect(piped.said().slice(answered.length)).toMatch(/^HTTP\/1\.1 408 /);
  });

  it('answers 408 a connection whose request headers are still arriving', async () => {
    const idle = client(port);
    idle.socket.write('GET /ok HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => idle.said().endsWith('ok'));
    idle.socket.write('GET /ok HTTP/1.1\r\nHo');
    await new Promise((resolve) => setTimeout(resolve, 100));
    const answered = idle.said();
    timeOutUnfinishedRequests(adapter);
    await idle.closed;
    expect(idle.said().slice(answered.length)).toMatch(/^HTTP\/1\.1 408 /);
  });
});
