import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { type SpooledDocument, spoolDocument } from '../../src/common/http/spooled-document';

/**
 * A body as the import route receives it (JSON, or a string as sent): its bytes, `chunkBytes` at
 * a time, into a spooled document. The caller closes it.
 */
export function spoolBody(
  body: unknown,
  limit: number,
  chunkBytes = 16 * 1_024,
): Promise<SpooledDocument> {
  const bytes = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += chunkBytes) {
    chunks.push(bytes.subarray(at, at + chunkBytes));
  }
  const request = Object.assign(Readable.from(chunks), { complete: true });
  return spoolDocument(request as unknown as IncomingMessage, limit);
}
