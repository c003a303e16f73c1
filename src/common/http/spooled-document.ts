import { createHash, randomUUID } from 'node:crypto';
import { type FileHandle, open, unlink } from 'node:fs/promises';
import type { IncomingMessage } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AppError } from '../errors/app-error';
import { pointerToken } from '../validation/json-schema-problems';
import {
  JsonInputError,
  type JsonEvents,
  JsonTokenizer,
  type TextInfo,
} from '../validation/json-tokenizer';
import {
  FORBIDDEN_KEYS,
  MAX_DOCUMENT_DEPTH,
  MAX_FIELD_NAME,
  shapeProblem,
} from '../validation/untrusted-json';

/** Where one member of the document's root object lies in the file: bytes `start` to `end`. */
export interface DocumentRange {
  start: number;
  end: number;
  /** The value is an array (its first byte is `[`). */
  isArray: boolean;
}

/** Distinct members a document's root object may have. */
export const MAX_ROOT_MEMBERS = 64;
/** Keys are kept, and echoed in problems, up to this many characters. */
export const MAX_KEY_LENGTH = 1_024;
/** Bytes read from the file at a time. */
const READ_CHUNK = 64 * 1_024;

/**
 * A document body (a route of JsonBodyOptions.documentRoutes) as it arrived: its bytes in a
 * temporary file, already checked to be one JSON object within the checks of every body
 * (contract §14: UTF-8, nesting, no prototype key, no U+0000 or unpaired surrogate), with the
 * SHA-256 of its bytes and where each member of its root object lies. It is read back a member
 * at a time (`read`), so nothing holds the whole document in memory.
 *
 * The file is unlinked as soon as it is opened: it lives as long as its descriptor, which `close`
 * ends, and nothing of it outlives a crash. Temporary space: one file per document in flight, of
 * at most the route's limit (docs/pmf-v1.md#import).
 */
export class SpooledDocument {
  private closed = false;

  constructor(
    private readonly file: FileHandle,
    /** SHA-256 of the body's bytes: what Idempotency-Key compares (docs/idempotency.md). */
    readonly digest: Buffer,
    readonly bytes: number,
    private readonly members: ReadonlyMap<string, DocumentRange>,
  ) {}

  /** The root object's members, in the order they first appear. */
  names(): string[] {
    return [...this.members.keys()];
  }

  /** Where a member's value lies; a repeated member is its last value, as JSON.parse keeps. */
  member(name: string): DocumentRange | undefined {
    return this.members.get(name);
  }

  /**
   * The bytes of `range`, a chunk at a time, each in the same buffer: a chunk is only good until
   * the next one is asked for (a tokenizer copies out what it keeps).
   */
  async *read(range: DocumentRange): AsyncGenerator<Buffer> {
    const buffer = Buffer.allocUnsafe(Math.min(READ_CHUNK, range.end - range.start));
    for (let position = range.start; position < range.end;) {
      const wanted = Math.min(buffer.length, range.end - position);
      const { bytesRead } = await this.file.read(buffer, 0, wanted, position);
      if (bytesRead === 0) throw new Error('The spooled document ended early');
      position += bytesRead;
      yield buffer.subarray(0, bytesRead);
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.file.close();
  }
}

interface Frame {
  isArray: boolean;
  /** The key, or the index, of the value being read in it. */
  step: string | number;
}

/**
 * Reads the events of the body as it arrives: where the root object's members lie, and the first
 * thing §14 refuses, thrown as 400 `validation_failed` by JSON pointer (the read stops there).
 * Strings are not kept, keys only to their first MAX_KEY_LENGTH characters.
 */
class DocumentScan implements JsonEvents {
  readonly members = new Map<string, DocumentRange>();
  private readonly frames: Frame[] = [];
  private member = '';
  private memberStart = 0;
  private memberIsArray = false;

  startObject(start: number): void {
    this.valueStarts(start, false, true);
    this.frames.push({ isArray: false, step: '' });
  }

  endObject(end: number): void {
    this.frames.pop();
    this.valueEnds(end);
  }

  startArray(start: number): void {
    this.valueStarts(start, true, false);
    this.frames.push({ isArray: true, step: -1 });
  }

  endArray(end: number): void {
    this.frames.pop();
    this.valueEnds(end);
  }

  key(name: string, info: TextInfo): void {
    const frame = this.frames[this.frames.length - 1];
    if (info.unsafe) {
      refuse(
        this.pointer(this.frames.length - 1),
        'keys must not contain U+0000 or unpaired surrogates',
      );
    }
    frame.step = name;
    if (FORBIDDEN_KEYS.has(name)) refuse(this.pointer(this.frames.length), 'is not an allowed key');
    if (this.frames.length === 1) this.member = name;
  }

  string(_value: string, info: TextInfo, start: number, end: number): void {
    this.valueStarts(start, false, false);
    if (info.unsafe) {
      refuse(this.pointer(this.frames.length), 'must not contain U+0000 or unpaired surrogates');
    }
    this.valueEnds(end);
  }

  number(_value: number, start: number, end: number): void {
    this.valueStarts(start, false, false);
    this.valueEnds(end);
  }

  literal(_value: boolean | null, start: number, end: number): void {
    this.valueStarts(start, false, false);
    this.valueEnds(end);
  }

  private valueStarts(start: number, isArray: boolean, isObject: boolean): void {
    const depth = this.frames.length;
    if (depth === 0) {
      if (!isObject) refuse('', 'must be a JSON object');
      return;
    }
    const frame = this.frames[depth - 1];
    if (frame.isArray) frame.step = (frame.step as number) + 1;
    if (depth === 1) {
      this.memberStart = start;
      this.memberIsArray = isArray;
    }
  }

  private valueEnds(end: number): void {
    if (this.frames.length !== 1) return;
    if (!this.members.has(this.member) && this.members.size === MAX_ROOT_MEMBERS) {
      refuse('', `must not have more than ${MAX_ROOT_MEMBERS} fields`);
    }
    this.members.set(this.member, { start: this.memberStart, end, isArray: this.memberIsArray });
  }

  /** The pointer of the first `depth` steps of the path. */
  private pointer(depth: number): string {
    return this.frames
      .slice(0, depth)
      .map(({ step }) => `/${typeof step === 'number' ? step : pointerToken(step)}`)
      .join('')
      .slice(0, MAX_FIELD_NAME);
  }
}

function refuse(field: string, problem: string): never {
  throw AppError.validation([{ field, problem }]);
}

export function tooLarge(limitBytes: number): AppError {
  return new AppError('payload_too_large', `The body exceeds the ${limitBytes} bytes it may have`);
}

/** What the tokenizer found wrong, as the API answers it. */
function inputError(error: JsonInputError): AppError {
  switch (error.problem) {
    case 'depth':
      return AppError.validation([
        { field: '', problem: shapeProblem('depth', MAX_DOCUMENT_DEPTH) },
      ]);
    case 'number':
      return AppError.validation([
        { field: '', problem: 'must not hold a number of more than 1000 characters' },
      ]);
    case 'encoding':
      return new AppError('malformed_json', 'The body is not UTF-8 text');
    default:
      return new AppError('malformed_json', 'The body is not valid JSON');
  }
}

/**
 * Receives the body, at most `limitBytes`, into a temporary file, checking it as it arrives
 * (DocumentScan) and hashing it. Each chunk is written before the next is read: a client sends no
 * faster than the disk takes it, and nothing but one chunk is in memory. The first problem stops
 * the read there (413 past the limit, 400 for the rest); nothing is left on disk.
 */
export async function spoolDocument(
  request: IncomingMessage,
  limitBytes: number,
  abandoned?: AbortSignal,
): Promise<SpooledDocument> {
  const path = join(tmpdir(), `document-${randomUUID()}.json`);
  const file = await open(path, 'wx+', 0o600);
  try {
    await unlink(path);
    const scan = new DocumentScan();
    const tokenizer = new JsonTokenizer(scan, {
      maxDepth: MAX_DOCUMENT_DEPTH,
      maxStringLength: 0,
      maxKeyLength: MAX_KEY_LENGTH,
    });
    const hash = createHash('sha256');
    let written = 0;
    await receive(request, limitBytes, abandoned, async (chunk) => {
      tokenizer.write(chunk);
      hash.update(chunk);
      await file.write(chunk, 0, chunk.length, written);
      written += chunk.length;
    });
    tokenizer.end();
    return new SpooledDocument(file, hash.digest(), written, scan.members);
  } catch (error) {
    await file.close();
    throw error instanceof JsonInputError ? inputError(error) : error;
  }
}

/**
 * Hands each chunk of the body to `take`, the request paused until it is done; stops at the
 * first failure. Past the limit, reading stops there: nothing more is taken in; so it does when
 * `abandoned` is aborted, failing with its reason.
 */
function receive(
  request: IncomingMessage,
  limitBytes: number,
  abandoned: AbortSignal | undefined,
  take: (chunk: Buffer) => Promise<void>,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let received = 0;
    let settled = false;
    let taking = Promise.resolve();

    const settle = (error?: Error) => {
      if (settled) return;
      settled = true;
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onFailure);
      request.off('close', onClose);
      abandoned?.removeEventListener('abort', onAbandoned);
      if (error === undefined) return resolve();
      request.pause();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      if (received + chunk.length > limitBytes) return settle(tooLarge(limitBytes));
      received += chunk.length;
      request.pause();
      taking = taking
        .then(() => take(chunk))
        .then(
          () => {
            if (!settled) request.resume();
          },
          (error: unknown) => settle(error instanceof Error ? error : new Error(String(error))),
        );
    };
    const onEnd = () => void taking.then(() => settle());
    const onFailure = () => settle(new AppError('malformed_json', 'The body could not be read'));
    // The client went away before the end: nobody is left to answer, but the promise must end.
    const onClose = () => {
      if (!request.complete) onFailure();
    };

    const onAbandoned = () => settle(abandoned!.reason as Error);

    if (abandoned?.aborted) return onAbandoned();
    abandoned?.addEventListener('abort', onAbandoned);
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onFailure);
    request.on('close', onClose);
  });
}
