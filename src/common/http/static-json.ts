import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';

/**
 * A JSON answer that never changes while the process runs (published vocabularies): serialized
 * and hashed once, so serving it costs no JSON.stringify, no string-to-bytes copy and no hash.
 */
export class StaticJson {
  readonly body: Buffer;
  /** Strong: the same bytes on every instance of the same release. */
  readonly etag: string;
  private readonly length: string;

  constructor(value: unknown) {
    this.body = Buffer.from(JSON.stringify(value), 'utf8');
    this.etag = `"${createHash('sha256').update(this.body).digest('base64url').slice(0, 32)}"`;
    this.length = String(this.body.length);
  }

  /**
   * Answers 200 with the body, or 304 when If-None-Match names this ETag. Headers already set
   * (request id, rate limits, nosniff) stay. `no-cache`: a cache may keep the body but asks again
   * each time, which the ETag makes cheap; a new release can change the bytes.
   */
  send(response: ServerResponse): void {
    response.setHeader('ETag', this.etag);
    response.setHeader('Cache-Control', 'no-cache');
    if (matchesIfNoneMatch((response.req as IncomingMessage | undefined)?.headers, this.etag)) {
      response.statusCode = 304;
      response.end();
      return;
    }
    response.statusCode = 200;
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.setHeader('Content-Length', this.length);
    response.end(this.body);
  }
}

/** RFC 9110 §13.1.2: `*` or a list of entity tags, compared weakly (a W/ prefix is ignored). */
export function matchesIfNoneMatch(
  headers: IncomingMessage['headers'] | undefined,
  etag: string,
): boolean {
  const header = headers?.['if-none-match'];
  if (!header) return false;
  if (header.trim() === '*') return true;
  for (const candidate of header.split(',')) {
    const tag = candidate.trim();
    if ((tag.startsWith('W/') ? tag.slice(2) : tag) === etag) return true;
  }
  return false;
}
