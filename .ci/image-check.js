// The image's runtime without a Docker engine, on whichever node is first on PATH: the Dockerfile's
// CMD started in DIR (the deps stage's node_modules and the built dist/) with a container's
// environment, /health/ready waited for, the HEALTHCHECK command run, a user signed up (argon2),
// the console fetched (its page and assets), then SIGTERM, which must end the process with exit
// code 0 and no deprecation warning printed.
// Usage: node .ci/image-check.js DIR, with DATABASE_URL (and REDIS_URL, if any) set.
'use strict';
const { spawn, spawnSync } = require('node:child_process');
const { randomBytes, randomUUID } = require('node:crypto');
const { readFileSync } = require('node:fs');
const { createServer } = require('node:net');
const { join } = require('node:path');

const dockerfile = readFileSync(join(__dirname, '..', 'Dockerfile'), 'utf8');
const runtime = dockerfile.slice(dockerfile.lastIndexOf('\nFROM '));
const cmd = JSON.parse(runtime.match(/^CMD (\[.*\])$/m)[1]);
const healthcheck = JSON.parse(runtime.match(/^HEALTHCHECK .*\\\n\s+CMD (\[.*\])$/m)[1]);

function fail(message, output = '') {
  console.error(`image check: ${message}${output && `\n${output}`}`);
  process.exit(1);
}

const freePort = () =>
  new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address();
      probe.close(() => resolve(port));
    });
  });

async function main() {
  const port = await freePort();
  const env = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    NODE_ENV: 'production',
    PORT: String(port),
    DATABASE_URL: process.env.DATABASE_URL,
    REDIS_URL: process.env.REDIS_URL ?? '',
    JWT_SECRET: randomBytes(32).toString('hex'),
    LOG_LEVEL: 'warn',
    NODE_OPTIONS: '--trace-deprecation',
  };
  const started = Date.now();
  const child = spawn(cmd[0], cmd.slice(1), {
    cwd: process.argv[2],
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk) => (output += chunk));
  child.stderr.on('data', (chunk) => (output += chunk));
  const exited = new Promise((resolve) =>
    child.once('exit', (code, signal) => resolve(code ?? signal)),
  );
  const base = `http://127.0.0.1:${port}`;

  for (;;) {
    const status = await fetch(`${base}/health/ready`).then(
      (r) => r.status,
      () => 0,
    );
    if (status === 200) break;
    if (child.exitCode !== null)
      fail(`the service exited with ${child.exitCode} before it was ready`, output);
    if (Date.now() - started > 60_000) {
      child.kill('SIGKILL');
      fail(`not ready after 60 s (last status ${status})`, output);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const ready = Date.now() - started;

  const check = spawnSync(healthcheck[0], healthcheck.slice(1), { env, encoding: 'utf8' });
  if (check.status !== 0) fail(`the HEALTHCHECK command exited with ${check.status}`, check.stderr);

  const signup = await fetch(`${base}/v1/auth/signup`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({
      email: `image-${randomUUID()}@example.test`,
      password: 'a long passphrase',
    }),
  });
  if (signup.status !== 201)
    fail(`signup answered ${signup.status}: ${await signup.text()}`, output);

  // The console is served from the image's dist/web with its security headers, and its assets.
  const page = await fetch(`${base}/console`);
  const html = await page.text();
  if (
    page.status !== 200 ||
    !/frame-ancestors 'none'/.test(page.headers.get('content-security-policy') ?? '')
  )
    fail(
      `/console answered ${page.status} (CSP: ${page.headers.get('content-security-policy')})`,
      output,
    );
  for (const [, asset] of html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)) {
    const response = await fetch(`${base}${asset}`);
    if (response.status !== 200) fail(`${asset} answered ${response.status}`, output);
  }

  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
  const code = await exited;
  clearTimeout(timer);
  if (code !== 0) fail(`SIGTERM ended the service with ${code}, not 0`, output);
  if (/DeprecationWarning|\[DEP\d+\]/.test(output)) fail('deprecation warnings', output);
  console.log(
    `image check: node ${process.version}, ready in ${ready} ms, HEALTHCHECK passed, signup 201, console served, exit 0 on SIGTERM`,
  );
}

main().catch((error) => fail(error.stack));
