import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { join } from 'node:path';
import { freePort } from './support/ports';

describe('Graceful shutdown (the real process, as main.ts starts it)', () => {
  it('on SIGTERM finishes the in-flight request, stops, and exits 0', async () => {
    const port = await freePort();
    const child = spawn(
      process.execPath,
      ['-r', 'ts-node/register/transpile-only', join(__dirname, '..', 'src', 'main.ts')],
      {
        env: {
          ...process.env,
          PORT: String(port),
          METRICS_PORT: '0',
          LOG_LEVEL: 'info',
        },
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const exited = new Promise<number | null>((resolve) =>
      child.once('exit', (code) => resolve(code)),
    );

    const deadline = Date.now() + 45_000;
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health/ready`)).ok) break;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`service did not start:\n${output}`);
      await new Promise((resolve) => setTimeout(resolve, 200));
    }

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
        child.kill('SIGTERM');
        setTimeout(() => req.end(body.slice(10)), 500);
      }, 300);
    });

    const finished = await response;
    expect(finished.status).toBe(201);
    expect(JSON.parse(finished.body).access_token).toEqual(expect.any(String));
    expect(await exited).toBe(0);
    expect(output).toContain('"msg":"stopped"');
    // New connections are refused once it has stopped.
    await expect(fetch(`http://127.0.0.1:${port}/health/live`)).rejects.toThrow();
  });
});
