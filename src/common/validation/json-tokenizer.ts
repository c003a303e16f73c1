import { StringDecoder } from 'node:string_decoder';

/** What a string or key held besides its text (contract §14's unsafe content). */
export interface TextInfo {
  /** Longer than the tokenizer keeps: `text` holds only its first characters. */
  truncated: boolean;
  /** Holds U+0000 or an unpaired UTF-16 surrogate (both only reachable through `\u` escapes). */
  unsafe: boolean;
}

/**
 * What a JsonTokenizer reports, in document order. Offsets are byte offsets in the whole input:
 * `start` is a value's first byte, `end` the byte after its last.
 */
export interface JsonEvents {
  startObject(start: number): void;
  endObject(end: number): void;
  startArray(start: number): void;
  endArray(end: number): void;
  key(name: string, info: TextInfo): void;
  string(value: string, info: TextInfo, start: number, end: number): void;
  number(value: number, start: number, end: number): void;
  literal(value: boolean | null, start: number, end: number): void;
}

export type JsonInputProblem = 'syntax' | 'encoding' | 'depth' | 'number';

/** Input that is not JSON (or not UTF-8), or past one of the tokenizer's bounds. */
export class JsonInputError extends Error {
  constructor(
    readonly problem: JsonInputProblem,
    readonly offset: number,
    message: string,
  ) {
    super(`${message} at byte ${offset}`);
  }
}

export interface JsonTokenizerOptions {
  /** Deepest nesting of objects and arrays; deeper: `depth`. */
  maxDepth: number;
  /** UTF-16 code units of a string value kept; the rest is read, checked and counted away. */
  maxStringLength: number;
  /** The same for keys. */
  maxKeyLength: number;
}

/** The longest number, in characters, the tokenizer reads (JSON sets none; a sane input needs 30). */
const MAX_NUMBER_CHARACTERS = 1_000;

const enum State {
  Value,
  /** After `[`: a value or `]`. */
  ValueOrEndArray,
  /** After `{`: a key or `}`. */
  KeyOrEndObject,
  /** After `,` in an object: a key. */
  Key,
  Colon,
  /** After a value: `,` or the container's end. */
  AfterValue,
  String,
  Escape,
  Unicode,
  Number,
  Literal,
  /** The root value is complete: only white space may follow. */
  Done,
}

const OBJECT = 1;
const ARRAY = 2;

const LITERALS: Record<number, { text: string; value: boolean | null }> = {
  0x74: { text: 'true', value: true },
  0x66: { text: 'false', value: false },
  0x6e: { text: 'null', value: null },
};

const ESCAPES: Record<number, string> = {
  0x22: '"',
  0x5c: '\\',
  0x2f: '/',
  0x62: '\b',
  0x66: '\f',
  0x6e: '\n',
  0x72: '\r',
  0x74: '\t',
};

function isWhiteSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

function hexValue(byte: number): number {
  if (byte >= 0x30 && byte <= 0x39) return byte - 0x30;
  if (byte >= 0x61 && byte <= 0x66) return byte - 0x57;
  if (byte >= 0x41 && byte <= 0x46) return byte - 0x37;
  return -1;
}

/** RFC 8259's number grammar, checked on the characters once the number has ended. */
const NUMBER = /^-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?$/;

/**
 * A streaming JSON tokenizer over UTF-8 bytes (RFC 8259), pushed a chunk at a time, whose memory
 * does not grow with its input: strings and keys are kept only up to a length (longer ones are
 * read on, checked and reported `truncated`), numbers up to 1,000 characters, nesting up to
 * `maxDepth`. It checks what JSON.parse and a strict UTF-8 decoder check together: the grammar,
 * the encoding (no overlong forms, no encoded surrogates, nothing past U+10FFFF), control
 * characters in strings; and reports U+0000 and unpaired surrogates (which JSON allows through
 * `\u` escapes) as `unsafe`. A string's escapes decode as JSON.parse decodes them.
 *
 * Written for documents of many megabytes read from a request or a file: the JSON parsers of npm
 * either hold a whole string whatever its length or are ES modules only (docs/pmf-v1.md#import).
 */
export class JsonTokenizer {
  private state = State.Value;
  private readonly stack: Uint8Array;
  private depth = 0;
  /** Bytes before the current chunk. */
  private base = 0;

  // The string or key being read.
  private isKey = false;
  private text = '';
  private length = 0;
  private truncated = false;
  private unsafe = false;
  /** The last code unit appended came from a `\u` escape and is a high surrogate. */
  private pendingHigh = false;
  private decoder = new StringDecoder('utf8');
  /** UTF-8 continuation bytes still expected, and the range the next one must be in. */
  private continuation = 0;
  private low = 0x80;
  private high = 0xbf;
  private unicode = 0;
  private unicodeDigits = 0;

  // The number or literal being read.
  private start = 0;
  private number = '';
  private literal = LITERALS[0x74];
  private literalIndex = 0;

  constructor(
    private readonly events: JsonEvents,
    private readonly options: JsonTokenizerOptions,
  ) {
    this.stack = new Uint8Array(options.maxDepth);
  }

  /** The bytes read so far. */
  get offset(): number {
    return this.base;
  }

  write(chunk: Uint8Array): void {
    const length = chunk.length;
    let i = 0;
    while (i < length) {
      const byte = chunk[i];
      switch (this.state) {
        case State.String: {
          // A run of plain characters is appended in one piece.
          let end = i;
          while (end < length) {
            const b = chunk[end];
            if (this.continuation > 0) {
              if (b < this.low || b > this.high) this.fail('encoding', end, 'Invalid UTF-8');
              this.continuation--;
              this.low = 0x80;
              this.high = 0xbf;
              end++;
              continue;
            }
            if (b === 0x22 || b === 0x5c) break;
            if (b < 0x20) this.fail('syntax', end, 'A control character in a string');
            if (b >= 0x80) this.leadByte(b, end);
            end++;
          }
          if (end > i) {
            if (this.pendingHigh) this.unpaired();
            this.appendBytes(chunk.subarray(i, end));
          }
          i = end;
          if (i === length) break;
          if (chunk[i] === 0x22) this.endString(i);
          else this.state = State.Escape;
          i++;
          break;
        }
        case State.Escape: {
          if (byte === 0x75) {
            this.state = State.Unicode;
            this.unicode = 0;
            this.unicodeDigits = 0;
          } else {
            const escaped = ESCAPES[byte];
            if (escaped === undefined) this.fail('syntax', i, 'An unknown escape');
            if (this.pendingHigh) this.unpaired();
            this.appendText(escaped);
            this.state = State.String;
          }
          i++;
          break;
        }
        case State.Unicode: {
          const digit = hexValue(byte);
          if (digit < 0) this.fail('syntax', i, 'A \\u escape without four hex digits');
          this.unicode = this.unicode * 16 + digit;
          if (++this.unicodeDigits === 4) {
            this.appendCodeUnit(this.unicode);
            this.state = State.String;
          }
          i++;
          break;
        }
        case State.Number: {
          let end = i;
          while (end < length && this.isNumberByte(chunk[end])) end++;
          this.number += String.fromCharCode(...chunk.subarray(i, end));
          if (this.number.length > MAX_NUMBER_CHARACTERS) {
            this.fail(
              'number',
              this.start - this.base,
              `A number longer than ${MAX_NUMBER_CHARACTERS}`,
            );
          }
          i = end;
          if (i < length) this.endNumber(this.base + i);
          break;
        }
        case State.Literal: {
          if (byte !== this.literal.text.charCodeAt(this.literalIndex)) {
            this.fail('syntax', i, 'An unknown literal');
          }
          i++;
          if (++this.literalIndex === this.literal.text.length) {
            this.events.literal(this.literal.value, this.start, this.base + i);
            this.afterValue();
          }
          break;
        }
        default:
          this.structural(byte, i);
          i++;
      }
    }
    this.base += length;
  }

  /** The input has ended: it must have been one whole JSON value. */
  end(): void {
    if (this.state === State.Number) this.endNumber(this.base);
    if (this.state !== State.Done) this.fail('syntax', 0, 'The input ended early');
  }

  private structural(byte: number, i: number): void {
    if (isWhiteSpace(byte)) return;
    const at = this.base + i;
    switch (this.state) {
      case State.Done:
        return this.fail('syntax', i, 'Text after the value');
      case State.Colon:
        if (byte !== 0x3a) this.fail('syntax', i, 'A key without a colon');
        this.state = State.Value;
        return;
      case State.KeyOrEndObject:
      case State.Key:
        if (byte === 0x7d && this.state === State.KeyOrEndObject) return this.close(OBJECT, at);
        if (byte !== 0x22) this.fail('syntax', i, 'A key that is not a string');
        return this.beginString(true, at);
      case State.AfterValue: {
        const container = this.stack[this.depth - 1];
        if (byte === 0x2c) {
          this.state = container === OBJECT ? State.Key : State.Value;
          return;
        }
        if (byte === 0x7d && container === OBJECT) return this.close(OBJECT, at);
        if (byte === 0x5d && container === ARRAY) return this.close(ARRAY, at);
        return this.fail('syntax', i, 'A value not followed by a comma or the end');
      }
      case State.ValueOrEndArray:
        if (byte === 0x5d) return this.close(ARRAY, at);
        return this.value(byte, i, at);
      default:
        return this.value(byte, i, at);
    }
  }

  private value(byte: number, i: number, at: number): void {
    switch (byte) {
      case 0x7b:
        this.open(OBJECT, i);
        this.events.startObject(at);
        this.state = State.KeyOrEndObject;
        return;
      case 0x5b:
        this.open(ARRAY, i);
        this.events.startArray(at);
        this.state = State.ValueOrEndArray;
        return;
      case 0x22:
        return this.beginString(false, at);
      case 0x74:
      case 0x66:
      case 0x6e:
        this.literal = LITERALS[byte];
        this.literalIndex = 1;
        this.start = at;
        this.state = State.Literal;
        return;
      default:
        if (byte === 0x2d || (byte >= 0x30 && byte <= 0x39)) {
          this.number = String.fromCharCode(byte);
          this.start = at;
          this.state = State.Number;
          return;
        }
        this.fail('syntax', i, 'Not a JSON value');
    }
  }

  private open(container: number, i: number): void {
    if (this.depth === this.options.maxDepth) {
      this.fail('depth', i, `Nested deeper than ${this.options.maxDepth} levels`);
    }
    this.stack[this.depth++] = container;
  }

  private close(container: number, at: number): void {
    this.depth--;
    if (container === OBJECT) this.events.endObject(at + 1);
    else this.events.endArray(at + 1);
    this.afterValue();
  }

  private afterValue(): void {
    this.state = this.depth === 0 ? State.Done : State.AfterValue;
  }

  private isNumberByte(byte: number): boolean {
    return (
      (byte >= 0x30 && byte <= 0x39) ||
      byte === 0x2e ||
      byte === 0x2d ||
      byte === 0x2b ||
      byte === 0x65 ||
      byte === 0x45
    );
  }

  private endNumber(end: number): void {
    if (!NUMBER.test(this.number)) this.fail('syntax', end - this.base, 'Not a JSON number');
    this.events.number(Number(this.number), this.start, end);
    this.afterValue();
  }

  private beginString(isKey: boolean, at: number): void {
    this.isKey = isKey;
    this.start = at;
    this.text = '';
    this.length = 0;
    this.truncated = false;
    this.unsafe = false;
    this.pendingHigh = false;
    this.state = State.String;
  }

  private endString(i: number): void {
    if (this.pendingHigh) this.unpaired();
    this.text += this.decoder.end();
    const info: TextInfo = { truncated: this.truncated, unsafe: this.unsafe };
    if (this.isKey) {
      this.events.key(this.text, info);
      this.state = State.Colon;
    } else {
      this.events.string(this.text, info, this.start, this.base + i + 1);
      this.afterValue();
    }
    this.text = '';
  }

  /** A UTF-8 lead byte: how many continuation bytes follow, and the range of the first one. */
  private leadByte(byte: number, i: number): void {
    this.low = 0x80;
    this.high = 0xbf;
    if (byte >= 0xc2 && byte <= 0xdf) this.continuation = 1;
    else if (byte >= 0xe0 && byte <= 0xef) {
      this.continuation = 2;
      if (byte === 0xe0) this.low = 0xa0; // overlong
      if (byte === 0xed) this.high = 0x9f; // an encoded surrogate
    } else if (byte >= 0xf0 && byte <= 0xf4) {
      this.continuation = 3;
      if (byte === 0xf0) this.low = 0x90; // overlong
      if (byte === 0xf4) this.high = 0x8f; // past U+10FFFF
    } else this.fail('encoding', i, 'Invalid UTF-8');
  }

  private limit(): number {
    return this.isKey ? this.options.maxKeyLength : this.options.maxStringLength;
  }

  private appendBytes(bytes: Uint8Array): void {
    if (this.truncated) return;
    const room = this.limit() - this.length;
    if (room === 0) {
      this.truncated = true;
      return;
    }
    // Never more bytes than the characters still wanted could take: at most 4 bytes each.
    const taken = bytes.length > room * 4 ? bytes.subarray(0, room * 4) : bytes;
    this.appendText(this.decoder.write(taken));
    if (taken !== bytes) this.markTruncated();
  }

  private appendText(text: string): void {
    if (this.truncated || text.length === 0) return;
    const room = this.limit() - this.length;
    if (text.length > room) {
      this.text += text.slice(0, room);
      this.markTruncated();
      return;
    }
    this.text += text;
    this.length += text.length;
  }

  private markTruncated(): void {
    this.truncated = true;
    this.length = this.limit();
    // A decoder that may have been cut mid-character is left behind: nothing more is kept.
    this.decoder = new StringDecoder('utf8');
  }

  private appendCodeUnit(unit: number): void {
    const isHigh = unit >= 0xd800 && unit <= 0xdbff;
    const isLow = unit >= 0xdc00 && unit <= 0xdfff;
    if (isLow && !this.pendingHigh) this.unpaired();
    if (!isLow && this.pendingHigh) this.unpaired();
    if (unit === 0) this.unsafe = true;
    this.pendingHigh = isHigh;
    this.appendText(String.fromCharCode(unit));
  }

  private unpaired(): void {
    this.unsafe = true;
    this.pendingHigh = false;
  }

  private fail(problem: JsonInputProblem, i: number, message: string): never {
    throw new JsonInputError(problem, this.base + i, message);
  }
}
