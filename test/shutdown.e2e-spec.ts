import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { runFromSource, waitUntilReady } from './support/built-app';
import { freePort } from './support/ports';

describe('Graceful shutdown (the real process, as main.ts starts it)', () => {
  it('on SIGTERM finishes the in-flight request, stops, and exits 0', async () => {
    const port = await freePort();
    const service = runFromSource({ PORT: String(port), METRICS_PORT: '0', LOG_LEVEL: 'info' });
    // Compiling src/ on start takes half a minute when the machine is busy (CI runs suites in
    // parallel), hence more than the default wait.
    await waitUntilReady(service, port, 90_000);

    // A request whose body is still arriving when SIGTERM lands.
    const body = JSON.stringify({
      email: `shutdown-${randomUUID()}@example.test`,
      password: 'a long enough password',
    });
    const response = new Promise<{ status: number; body: string }>((resolve, reject) => {
      const req = request(
        {
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/auth/signup',
          headers: {
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(body),
          },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      req.on('error', reject);
      req.write(body.slice(0, 10));
      setTimeout(() => {
        service.child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(10)), 500);
      }, 300);
    });

    const finished = await response;
    expect(finished.status).toBe(201);
    expect(JSON.parse(finished.body).access_token).toEqual(expect.any(String));
    expect(await service.exited).toBe(0);
    expect(service.output()).toContain('"msg":"stopped"');
    // New connections are refused once it has stopped.
    await expect(fetch(`http://127.0.0.1:${port}/health/live`)).rejects.toThrow();
  }, 150_000);
});
