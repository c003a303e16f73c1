import { createHash } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Readable } from 'node:stream';
import { AppError } from '../errors/app-error';
import { MAX_ROOT_MEMBERS, type SpooledDocument, spoolDocument } from './spooled-document';

/** A request whose body arrives in chunks of `size` bytes. */
function requestOf(body: string | Buffer, size = 5): IncomingMessage {
  const bytes = Buffer.isBuffer(body) ? body : Buffer.from(body);
  const chunks: Buffer[] = [];
  for (let at = 0; at < bytes.length; at += size) chunks.push(bytes.subarray(at, at + size));
  const stream = Readable.from(chunks, { objectMode: false });
  const request = Object.assign(stream, { headers: {}, complete: false });
  stream.prependListener('end', () => (request.complete = true));
  return request as unknown as IncomingMessage;
}

async function refusal(body: string, limit = 1_000): Promise<AppError> {
  const refused = await spoolDocument(requestOf(body), limit).then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(refused).toBeInstanceOf(AppError);
  return refused as AppError;
}

async function text(document: SpooledDocument, name: string): Promise<string> {
  const parts: string[] = [];
  for await (const chunk of document.read(document.member(name)!)) parts.push(chunk.toString());
  return parts.join('');
}

describe('spoolDocument', () => {
  it('keeps the body in a file, knows where each root member lies and hashes the bytes', async () => {
    const body = ' {"a" : [1, {"x":"é"}] ,"b":{"c":"\\u00e9"},"n":-1.5e3,"a":"again"} ';
    const document = await spoolDocument(requestOf(body, 3), 1_000);
    try {
      expect(document.names()).toEqual(['a', 'b', 'n']);
      // A repeated member is its last value, as JSON.parse keeps it.
      expect(await text(document, 'a')).toBe('"again"');
      expect(document.member('a')?.isArray).toBe(false);
      expect(await text(document, 'b')).toBe('{"c":"\\u00e9"}');
      expect(await text(document, 'n')).toBe('-1.5e3');
      expect(document.bytes).toBe(Buffer.byteLength(body));
      expect(document.digest).toEqual(createHash('sha256').update(body).digest());
    } finally {
      await document.close();
    }
  });

  it('reads a member larger than a chunk back whole', async () => {
    const items = Array.from({ length: 20_000 }, (_, i) => i);
    const document = await spoolDocument(requestOf(JSON.stringify({ items }), 4_096), 1 << 20);
    try {
      expect(document.member('items')?.isArray).toBe(true);
      expect(JSON.parse(await text(document, 'items'))).toEqual(items);
    } finally {
      await document.close();
    }
  });

  it.each([
    ['[1]', '', 'must be a JSON object'],
    ['"pmf"', '', 'must be a JSON object'],
    ['{"a":{"__proto__":1}}', '/a/__proto__', 'is not an allowed key'],
    ['{"a":[0,"x\\u0000"]}', '/a/1', 'must not contain U+0000 or unpaired surrogates'],
    ['{"a":{"k\\ud800":1}}', '/a', 'keys must not contain U+0000 or unpaired surrogates'],
  ])('refuses %s naming %j', async (body, field, problem) => {
    const error = await refusal(body);
    expect(error.code).toBe('validation_failed');
    expect(error.details).toEqual([{ field, problem }]);
  });

  it(`refuses a root object of more than ${MAX_ROOT_MEMBERS} members`, async () => {
    const members = (n: number) =>
      `{${Array.from({ length: n }, (_, i) => `"m${i}":${i}`).join(',')}}`;
    const document = await spoolDocument(requestOf(members(MAX_ROOT_MEMBERS)), 10_000);
    await document.close();
    const error = await refusal(members(MAX_ROOT_MEMBERS + 1), 10_000);
    expect(error.details?.[0].problem).toMatch(/more than 64 fields/);
  });

  it('tells text that is not JSON or not UTF-8, nesting too deep, and a body past its limit', async () => {
    expect((await refusal('{"a":')).code).toBe('malformed_json');
    expect((await refusal('{"a":1} x')).code).toBe('malformed_json');
    const notUtf8 = await spoolDocument(
      requestOf(Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d])),
      100,
    ).catch((error: unknown) => error as AppError);
    expect((notUtf8 as AppError).message).toMatch(/UTF-8/);
    // A document takes MAX_DOCUMENT_DEPTH (72): its values may nest 64 of their own, 5 down.
    const deep = await refusal(`{"a":${'['.repeat(72)}${']'.repeat(72)}}`);
    expect(deep.details).toEqual([{ field: '', problem: 'must not nest deeper than 72 levels' }]);
    const large = await refusal(`{"a":"${'x'.repeat(2_000)}"}`);
    expect(large.code).toBe('payload_too_large');
  });
});
