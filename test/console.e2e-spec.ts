import { readdirSync, readFileSync } from 'node:fs';
import { get, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import type { Response } from 'supertest';
import { expectError, expectRequestId } from './support/assertions';
import { ensureBuilt } from './support/built-app';
import { type Service, startService } from './support/service';
import { createTestApp, type TestApp } from './support/test-app';

const root = join(__dirname, '..');

/** Headers every /console response carries (contract §28), whatever its status. */
function expectConsoleHeaders(response: Response): void {
  const csp = response.headers['content-security-policy'];
  expect(csp).toBe(
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
  );
  expect(csp).not.toMatch(/unsafe-inline|unsafe-eval|\*|https?:/);
  expect(response.headers['referrer-policy']).toBe('no-referrer');
  expect(response.headers['x-content-type-options']).toBe('nosniff');
  expect(response.headers['x-frame-options']).toBe('DENY');
  expect(response.headers['cross-origin-opener-policy']).toBe('same-origin');
  expectRequestId(response);
}

/** Every file of a folder, recursively. */
function filesOf(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory() ? filesOf(join(dir, entry.name)) : [join(dir, entry.name)],
  );
}

/**
 * GET /console (contract §28): the built console served by the service, its security and cache
 * headers, its compressed assets; the browser tests (test/browser/) use it as a person does.
 */
describe('The console: files and headers (contract §28)', () => {
  let t: TestApp;
  let page: Response;
  let assets: string[];

  beforeAll(async () => {
    ensureBuilt();
    t = await createTestApp();
    page = await t.http().get('/console');
    assets = [...String(page.text).matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map(
      (match) => match[1],
    );
  }, 180_000);
  afterAll(() => t.close());

  /** The bytes as sent (supertest and fetch would undo the compression). */
  async function rawGet(
    path: string,
    acceptEncoding: string,
  ): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
    if (!t.server.listening)
      await new Promise<void>((done) => t.server.listen(0, '127.0.0.1', done));
    const { port } = t.server.address() as AddressInfo;
    return new Promise((resolve, reject) => {
      get(
        { host: '127.0.0.1', port, path, headers: { 'accept-encoding': acceptEncoding } },
        (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () =>
            resolve({
              status: response.statusCode!,
              headers: response.headers,
              body: Buffer.concat(chunks),
            }),
          );
        },
      ).on('error', reject);
    });
  }

  it('serves its page with the security headers, asked for again each time (ETag)', () => {
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(page.headers['cache-control']).toBe('no-cache');
    expect(page.headers.etag).toMatch(/^"[\w-]{32}"$/);
    expectConsoleHeaders(page);
    // No inline script or style for the CSP to refuse, and nothing from another origin.
    expect(page.text).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>|<style|\sstyle=|\son\w+=/i);
    expect(page.text).not.toMatch(/https?:\/\//);
    expect(assets).toEqual([
      expect.stringMatching(/^\/console\/assets\/favicon-[0-9a-f]{12}\.svg$/),
      expect.stringMatching(/^\/console\/assets\/console-[0-9a-f]{12}\.css$/),
      expect.stringMatching(/^\/console\/assets\/console-[0-9a-f]{12}\.js$/),
    ]);
  });

  it('answers every path under /console with the page (its routes and mail links)', async () => {
    for (const path of [
      '/console/',
      '/console/usage',
      '/console/reset-password?token=abc',
      '/console/a/b',
    ]) {
      const response = await t.http().get(path);
      expect({ path, status: response.status }).toEqual({ path, status: 200 });
      expect(response.text).toBe(page.text);
      expectConsoleHeaders(response);
    }
  });

  it('serves the assets under their content hash, immutable, compressed as the client accepts', async () => {
    for (const asset of assets) {
      const plain = await rawGet(asset, 'identity');
      expect(plain.status).toBe(200);
      expect(plain.headers['cache-control']).toBe('public, max-age=31536000, immutable');
      expect(plain.headers.vary).toBe('Accept-Encoding');
      expect(plain.headers['content-encoding']).toBeUndefined();
      for (const [coding, decode] of [
        ['br', brotliDecompressSync],
        ['gzip', gunzipSync],
      ] as const) {
        const compressed = await rawGet(asset, `${coding}, deflate`);
        expect(compressed.headers['content-encoding']).toBe(coding);
        expect(compressed.body.length).toBeLessThan(plain.body.length);
        expect(decode(compressed.body).equals(plain.body)).toBe(true);
      }
    }
    const script = await t.http().get(assets[2]);
    expect(script.headers['content-type']).toBe('text/javascript; charset=utf-8');
    const style = await t.http().get(assets[1]);
    expect(style.headers['content-type']).toBe('text/css; charset=utf-8');
  });

  it('answers 304 to a matching If-None-Match, HEAD without a body, 404 for an unknown file', async () => {
    const again = await t.http().get('/console/usage').set('If-None-Match', page.headers.etag);
    expect(again.status).toBe(304);
    expect(again.text).toBe('');
    expectConsoleHeaders(again);
    const head = await t.http().head('/console');
    expect(head.status).toBe(200);
    expect(Number(head.headers['content-length'])).toBeGreaterThan(0);
    expect(head.text).toBeUndefined();
    expectConsoleHeaders(head);
    const missing = await t.http().get('/console/assets/console-000000000000.js');
    expectError(missing, 404, 'not_found');
    expectConsoleHeaders(missing);
    // Answered before any route: a malformed address, another method, another spelling.
    const malformed = await t.http().get('/console/%ZZ');
    expect(malformed.status).toBe(400);
    expectConsoleHeaders(malformed);
    for (const other of [t.http().post('/console').send({}), t.http().get('/CONSOLE/usage')]) {
      expectConsoleHeaders(await other);
    }
    // The API's own answers carry none of them.
    const api = await t.http().get('/v1/openapi.json');
    expect(api.headers['content-security-policy']).toBeUndefined();
    // Not part of the API: the OpenAPI document does not list it.
    const openapi = api;
    expect(Object.keys(openapi.body.paths).filter((path) => path.startsWith('/console'))).toEqual(
      [],
    );
  });

  it('ships no code that inserts text as HTML or evaluates strings', () => {
    const sources = filesOf(join(root, 'web', 'src')).filter((file) => /\.tsx?$/.test(file));
    expect(sources.length).toBeGreaterThan(10);
    for (const file of sources) {
      const text = readFileSync(file, 'utf8');
      expect({
        file,
        found: text.match(
          /dangerouslySetInnerHTML|innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/g,
        ),
      }).toEqual({ file, found: null });
    }
  });
});

describe('The console on the built service (node dist/main.js)', () => {
  let built: Service;

  beforeAll(async () => {
    built = await startService('built', {});
  }, 180_000);
  afterAll(() => built?.close());

  it('sends the console headers before any route answers: a malformed address, another method', async () => {
    const malformed = await built.http().get('/console/%ZZ');
    expect(malformed.status).toBe(400);
    expectConsoleHeaders(malformed);
    expectConsoleHeaders(await built.http().post('/console').send({}));
    const api = await built.http().get('/v1/openapi.json');
    expect(api.headers['content-security-policy']).toBeUndefined();
  });
});
