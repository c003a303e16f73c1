import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { extname, join, relative, sep } from 'node:path';
import { matchesIfNoneMatch } from '../common/http/static-json';

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.svg': 'image/svg+xml',
  '.png': 'image/png',
  '.woff2': 'font/woff2',
  '.json': 'application/json; charset=utf-8',
};

/** The page every console route answers with; the script routes on the path. */
export const CONSOLE_PAGE = 'index.html';

/** Assets carry a hash of their content in their name (web/build.mjs): cached for good. */
const IMMUTABLE = 'public, max-age=31536000, immutable';
/** The page names the assets of the release: kept, but asked for again each time (ETag). */
const REVALIDATE = 'no-cache';

interface ConsoleFile {
  type: string;
  etag: string;
  cacheControl: string;
  identity: Buffer;
  /** Compressed by the build beside the file (`.br`, `.gz`), when that is smaller. */
  br?: Buffer;
  gzip?: Buffer;
}

/**
 * The built console (dist/web, written by `npm run build`), read into memory once: a few
 * hundred kilobytes with their compressed copies, so a request costs no disk read and no
 * compression. Where the build is missing (the e2e app runs from the sources), every console
 * request answers 404 saying how to build it.
 */
export class ConsoleFiles {
  private readonly files = new Map<string, ConsoleFile>();

  constructor(readonly directory: string) {
    if (!existsSync(join(directory, CONSOLE_PAGE))) return;
    for (const path of walk(directory)) {
      const name = relative(directory, path).split(sep).join('/');
      const type = TYPES[extname(name)];
      if (!type) continue;
      const identity = readFileSync(path);
      const compressed = (suffix: string) =>
        existsSync(`${path}${suffix}`) ? readFileSync(`${path}${suffix}`) : undefined;
      this.files.set(name, {
        type,
        etag: `"${createHash('sha256').update(identity).digest('base64url').slice(0, 32)}"`,
        cacheControl: name === CONSOLE_PAGE ? REVALIDATE : IMMUTABLE,
        identity,
        br: compressed('.br'),
        gzip: compressed('.gz'),
      });
    }
  }

  get built(): boolean {
    return this.files.has(CONSOLE_PAGE);
  }

  has(name: string): boolean {
    return this.files.has(name);
  }

  /**
   * Answers the file: 304 when If-None-Match names its ETag, else its bytes in the best encoding
   * the client accepts (br, gzip, none), with `Vary: Accept-Encoding`. HEAD gets the headers.
   */
  send(request: IncomingMessage, response: ServerResponse, name: string): void {
    const file = this.files.get(name)!;
    response.setHeader('ETag', file.etag);
    response.setHeader('Cache-Control', file.cacheControl);
    response.setHeader('Vary', 'Accept-Encoding');
    if (matchesIfNoneMatch(request.headers, file.etag)) {
      response.statusCode = 304;
      response.end();
      return;
    }
    const accepted = acceptedEncodings(request.headers['accept-encoding']);
    let body = file.identity;
    if (file.br && accepted.has('br')) {
      body = file.br;
      response.setHeader('Content-Encoding', 'br');
    } else if (file.gzip && accepted.has('gzip')) {
      body = file.gzip;
      response.setHeader('Content-Encoding', 'gzip');
    }
    response.statusCode = 200;
    response.setHeader('Content-Type', file.type);
    response.setHeader('Content-Length', String(body.length));
    response.end(request.method === 'HEAD' ? undefined : body);
  }
}

function* walk(directory: string): Generator<string> {
  for (const entry of readdirSync(directory, { withFileTypes: true })) {
    const path = join(directory, entry.name);
    if (entry.isDirectory()) yield* walk(path);
    else if (entry.isFile() && !/\.(br|gz)$/.test(entry.name)) yield path;
  }
}

/** The codings an Accept-Encoding header accepts (q=0 refuses one). */
function acceptedEncodings(header: string | string[] | undefined): Set<string> {
  const accepted = new Set<string>();
  for (const part of [header ?? ''].flat().join(',').split(',')) {
    const [coding, ...parameters] = part.trim().toLowerCase().split(';');
    if (!coding) continue;
    const q = parameters.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q && Number(q.slice(2)) === 0) continue;
    accepted.add(coding);
  }
  return accepted;
}
