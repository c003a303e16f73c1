import { JsonPieceReader, type Piece } from './json-pieces';
import { JsonInputError, type JsonEvents, JsonTokenizer, type TextInfo } from './json-tokenizer';

const OPTIONS = { maxDepth: 64, maxStringLength: 1_000, maxKeyLength: 100 };
const BUDGET = { maxValues: 100_000, maxCharacters: 1_000_000 };

/** The pieces of `text` fed in chunks of `size` bytes (every split of a character included). */
function piecesOf(text: string | Buffer, size = 7, options = OPTIONS, budget = BUDGET): Piece[] {
  const pieces: Piece[] = [];
  const tokenizer = new JsonTokenizer(
    new JsonPieceReader(budget, (piece) => pieces.push(piece)),
    options,
  );
  const bytes = Buffer.isBuffer(text) ? text : Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) tokenizer.write(bytes.subarray(at, at + size));
  tokenizer.end();
  return pieces;
}

/** The value of a document that is not an array, built whole. */
function valueOf(text: string | Buffer, size?: number): unknown {
  const pieces = piecesOf(text, size);
  expect(pieces).toHaveLength(1);
  return (pieces[0] as { value: unknown }).value;
}

function failure(text: string | Buffer, options = OPTIONS): JsonInputError {
  try {
    piecesOf(text, 3, options);
  } catch (error) {
    if (error instanceof JsonInputError) return error;
    throw error;
  }
  throw new Error(`accepted ${String(text)}`);
}

const VALID = [
  '{}',
  '[]',
  '0',
  '-0.5e-3',
  '1E+2',
  '"x"',
  'true',
  'false',
  'null',
  ' \t\r\n{ "a" : [ 1 , 2.5 , -3 , true , false , null , "s" ] , "b" : { } } \n',
  '{"é":"ünïcødé 😀 中文","emoji":"\\ud83d\\ude00","esc":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}',
  '{"a":{"a":{"a":[[[[]]]]}},"a":2}',
  JSON.stringify({
    memories: Array.from({ length: 50 }, (_, i) => ({ id: String(i), n: i * 1.5 })),
  }),
];

describe('JsonTokenizer and JsonPieceReader', () => {
  it.each(VALID)('reads %s as JSON.parse does, whatever the chunks', (text) => {
    for (const size of [1, 2, 3, 5, 64, 1 << 20]) {
      // An array's items are its pieces: one inside another is the one piece.
      expect(valueOf(text.startsWith('[') ? `[${text}]` : text, size)).toEqual(JSON.parse(text));
    }
  });

  it('hands the items of an array on one at a time, with their indexes', () => {
    const pieces = piecesOf('[{"a":1},"b",[2],null]', 4);
    expect(pieces).toEqual([
      { index: 0, value: { a: 1 }, characters: 1 },
      { index: 1, value: 'b', characters: 1 },
      { index: 2, value: [2], characters: 0 },
      { index: 3, value: null, characters: 0 },
    ]);
  });

  it.each([
    '',
    '{',
    '{"a":}',
    '{"a" 1}',
    '{a:1}',
    '[1,]',
    '{"a":1,}',
    '[1 2]',
    '01',
    '1.',
    '-',
    '.5',
    '1e',
    '+1',
    'tru',
    'nul',
    'True',
    '"abc',
    '"a\\x"',
    '"\\u12G4"',
    '"tab\there"',
    '"line\nbreak"',
    '{} {}',
    '[]]',
    '\ufeff{}',
    "{'a':1}",
  ])('refuses %j as JSON.parse does', (text) => {
    expect(() => JSON.parse(text.replace('\ufeff', '\u0000'))).toThrow();
    expect(failure(text).problem).toBe('syntax');
  });

  it.each([
    ['a lone continuation byte', [0x22, 0x80, 0x22]],
    ['a lead byte without its continuation', [0x22, 0xc3, 0x22]],
    ['an overlong form', [0x22, 0xc0, 0xaf, 0x22]],
    ['an overlong three-byte form', [0x22, 0xe0, 0x80, 0xaf, 0x22]],
    ['an encoded surrogate', [0x22, 0xed, 0xa0, 0x80, 0x22]],
    ['a code point past U+10FFFF', [0x22, 0xf4, 0x90, 0x80, 0x80, 0x22]],
    ['0xFF', [0x22, 0xff, 0x22]],
  ])('refuses invalid UTF-8: %s', (_name, bytes) => {
    expect(failure(Buffer.from(bytes)).problem).toBe('encoding');
    expect(() => new TextDecoder('utf-8', { fatal: true }).decode(Buffer.from(bytes))).toThrow();
  });

  it('refuses a non-ASCII character outside a string', () => {
    expect(failure('{é:1}').problem).toBe('syntax');
  });

  it('refuses nesting past maxDepth, counting objects and arrays alike', () => {
    const deep = (n: number) => `${'[{"a":'.repeat(n / 2)}1${'}]'.repeat(n / 2)}`;
    expect(valueOf(`{"x":${deep(62)}}`)).toBeDefined();
    expect(failure(`[${deep(64)}]`).problem).toBe('depth');
  });

  it('refuses a number longer than 1,000 characters', () => {
    expect(failure(`[${'1'.repeat(1_001)}]`).problem).toBe('number');
    expect(valueOf(`[${'1'.repeat(300)}]`)).toEqual(Number('1'.repeat(300)));
  });

  it('reports U+0000 and unpaired surrogates (only reachable by escapes) as unsafe', () => {
    const seen: Array<[string, TextInfo]> = [];
    const events: JsonEvents = {
      startObject: () => undefined,
      endObject: () => undefined,
      startArray: () => undefined,
      endArray: () => undefined,
      key: (name, info) => seen.push([name, info]),
      string: (value, info) => seen.push([value, info]),
      number: () => undefined,
      literal: () => undefined,
    };
    const tokenizer = new JsonTokenizer(events, OPTIONS);
    tokenizer.write(
      Buffer.from(
        '["a\\u0000","\\ud800","\\udc00x","\\ud800\\u0041","\\ud83d\\ude00","ok","\\ud800é",{"\\u0000":1}]',
      ),
    );
    tokenizer.end();
    expect(seen.map(([, info]) => info.unsafe)).toEqual([
      true,
      true,
      true,
      true,
      false,
      false,
      true,
      true,
    ]);
    expect(seen[4][0]).toBe('😀');
  });

  it('keeps a string only up to its limit, reads the rest and says it was cut', () => {
    const long = 'é'.repeat(5_000);
    const pieces = piecesOf(`[{"short":"ok","long":"${long}"},"next"]`, 1_000);
    expect(pieces).toEqual([
      { index: 0, problem: "is longer than a document's strings may be", at: '/long' },
      { index: 1, value: 'next', characters: 4 },
    ]);
    expect(piecesOf(`[{"${'k'.repeat(101)}":1}]`)[0]).toMatchObject({ at: `/${'k'.repeat(100)}` });
  });

  it('does not build a piece past its budget, and goes on with the next', () => {
    const budget = { maxValues: 10, maxCharacters: 50 };
    const many = JSON.stringify(Array.from({ length: 20 }, (_, i) => i));
    const pieces = piecesOf(`[${many},"${'x'.repeat(51)}",[1,2]]`, 5, OPTIONS, budget);
    expect(pieces.map((piece) => ('value' in piece ? piece.value : piece.at))).toEqual([
      '',
      '',
      [1, 2],
    ]);
    expect(pieces[0]).toMatchObject({ problem: expect.stringMatching(/larger than one item/) });
  });

  it('names the pointer of a cut string deep in a piece', () => {
    const pieces = piecesOf(`[{"a":[0,{"b/c":"${'x'.repeat(1_001)}"}]}]`);
    expect(pieces[0]).toMatchObject({ at: '/a/1/b~1c' });
  });

  it('reports byte offsets of values in the whole input', () => {
    const spans: Array<[number, number]> = [];
    const events: JsonEvents = {
      startObject: () => undefined,
      endObject: (end) => spans.push([-1, end]),
      startArray: () => undefined,
      endArray: () => undefined,
      key: () => undefined,
      string: (_v, _i, start, end) => spans.push([start, end]),
      number: (_v, start, end) => spans.push([start, end]),
      literal: (_v, start, end) => spans.push([start, end]),
    };
    const tokenizer = new JsonTokenizer(events, OPTIONS);
    const text = '{"a": "é", "b": 12.5, "c": null}';
    for (const byte of Buffer.from(text)) tokenizer.write(Uint8Array.of(byte));
    tokenizer.end();
    const bytes = Buffer.from(text);
    expect(spans.slice(0, 3).map(([s, e]) => bytes.subarray(s, e).toString())).toEqual([
      '"é"',
      '12.5',
      'null',
    ]);
    expect(spans[3][1]).toBe(bytes.length);
  });
});
