import express, { type RequestHandler } from 'express';
import { once } from 'node:events';
import { request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { createRootLogger } from './root-logger';
import { CLIENT_CLOSED_REQUEST, createHttpLogger } from './http-logger';

describe('createHttpLogger', () => {
  it('logs and counts a request whose client left before any answer as 499, not the status set in advance (review)', async () => {
    const lines: Array<Record<string, unknown>> = [];
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
        done();
      },
    });
    const observed: number[] = [];
    const app = express();
    const logged = createHttpLogger(
      createRootLogger('info', destination),
      'k'.repeat(32),
      (_r, status) => observed.push(status),
    );
    // As configure-http.ts mounts it (Nest's use takes any middleware).
    app.use(logged as unknown as RequestHandler);
    let handled!: () => void;
    const reached = new Promise<void>((resolve) => (handled = resolve));
    let kept = 0;
    // As Nest does for a POST: the status is set before the handler has anything to answer.
    app.post('/slow', (_req, res) => {
      res.status(201);
      res.on('close', () => setImmediate(() => (kept = res.statusCode)));
      handled();
    });
    const server: Server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    try {
      const { port } = server.address() as AddressInfo;
      const client = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/slow' });
      client.on('error', () => undefined);
      client.end();
      await reached;
      client.destroy();
      for (let waited = 0; lines.length === 0 && waited < 2_000; waited += 20) {
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(lines).toEqual([
        expect.objectContaining({ status: CLIENT_CLOSED_REQUEST, aborted: true, level: 'warn' }),
      ]);
      expect(observed).toEqual([CLIENT_CLOSED_REQUEST]);
      // The response keeps the handler's status: an idempotent answer stored later is its own.
      expect(kept).toBe(201);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
