import fc from 'fast-check';

/**
 * Hostile inputs for the fuzz suite, each with a label so a failure report says what was sent
 * without dumping 300 KB. Body values are JSON text fragments (so a key like `__proto__` or a
 * 5,000-level nesting reaches the server exactly as written); path and query values are already
 * percent-encoded (so a lone surrogate or a NUL can be sent at all).
 */
export interface Labelled {
  label: string;
  text: string;
}

const json = (label: string, value: unknown): Labelled => ({
  label,
  text: JSON.stringify(value),
});

export const deepObject = (levels: number, leaf = '1'): string =>
  '{"a":'.repeat(levels) + leaf + '}'.repeat(levels);
export const deepArray = (levels: number, leaf = '1'): string =>
  '['.repeat(levels) + leaf + ']'.repeat(levels);

/** JSON values of the wrong type, or of the right type but outside anything sensible. */
export const BODY_VALUES: Labelled[] = [
  json('null', null),
  json('true', true),
  json('zero', 0),
  json('-1', -1),
  { label: '-0', text: '-0' },
  json('1e308', 1e308),
  json('-1e308', -1e308),
  { label: '1e999 (overflows to Infinity)', text: '1e999' },
  json('2^53+1', 2 ** 53 + 1),
  { label: '2^64 as literal', text: '18446744073709551617' },
  json('1.5', 1.5),
  json('empty array', []),
  json('array of numbers', [1, 2, 3]),
  json('empty object', {}),
  json('object', { a: 1 }),
  json('empty string', ''),
  json('NUL string', '\u0000'),
  json('NUL inside string', 'a\u0000b'),
  json('lone high surrogate', '\ud800'),
  json('lone low surrogate', '\udc00'),
  json('surrogates reversed', 'x\udc00\ud800y'),
  json('control characters', '\u0001\u001f\u007f'),
  json('long string 300 KB', 'a'.repeat(300_000)),
  json('long string 20 KB', 'b'.repeat(20_000)),
  json('emoji 4 KB', '\u{1F600}'.repeat(1000)),
  json('month 0000-01', '0000-01'),
  json('month 10000-01', '10000-01'),
  json('date 0000-01-01', '0000-01-01T00:00:00.000Z'),
  json('date 10000-01-01', '+010000-01-01T00:00:00.000Z'),
  json('date -000001', '-000001-01-01T00:00:00.000Z'),
  json('date 1969', '1969-12-31T23:59:59.999Z'),
  json('date 9999', '9999-12-31T23:59:59.999Z'),
  json('not a date', '2026-02-30T25:61:61Z'),
  json('uuid nil', '00000000-0000-0000-0000-000000000000'),
  json('__proto__ string', '__proto__'),
  json('sql', "' OR 1=1; --"),
  json('path traversal', '../../../etc/passwd'),
  json('percent NUL', '%00'),
  { label: 'deep object 100', text: deepObject(100) },
  { label: 'deep object 5000', text: deepObject(5000) },
  { label: 'deep array 100', text: deepArray(100) },
  { label: 'deep array 5000', text: deepArray(5000) },
  { label: 'deep object 5000 with \\u escape', text: deepObject(5000, '"\\u0041"') },
  { label: 'deep array 2500 with __proto__', text: deepArray(2500, '{"__proto__":{"x":1}}') },
  { label: '__proto__ key', text: '{"__proto__":{"polluted":true}}' },
  { label: 'constructor.prototype keys', text: '{"constructor":{"prototype":{"polluted":true}}}' },
  { label: 'prototype key', text: '{"prototype":1}' },
  { label: 'nested __proto__ at depth 3', text: '{"a":{"b":{"__proto__":{"x":1}}}}' },
];

/** Whole request bodies that are not what any endpoint expects. */
export const WHOLE_BODIES: Labelled[] = [
  ...BODY_VALUES,
  { label: 'malformed {', text: '{' },
  { label: 'malformed trailing comma', text: '{"a":1,}' },
  { label: 'empty text', text: '' },
  { label: 'whitespace only', text: '   ' },
  { label: 'duplicate keys', text: '{"a":1,"a":2}' },
  { label: 'BOM + object', text: '\ufeff{}' },
  { label: 'two documents', text: '{}{}' },
  { label: 'lone surrogate escape in key', text: '{"\\ud800":1}' },
  { label: 'NUL escape in key', text: '{"\\u0000":1}' },
  { label: 'deep object 64', text: deepObject(64) },
  { label: 'deep object 65', text: deepObject(65) },
];

export const PATH_SEGMENTS: Labelled[] = [
  { label: 'NUL', text: '%00' },
  { label: 'NUL inside', text: 'a%00b' },
  { label: 'lone high surrogate (WTF-8)', text: '%ED%A0%80' },
  { label: 'lone low surrogate (WTF-8)', text: '%ED%B0%80' },
  { label: 'overlong NUL', text: '%C0%80' },
  { label: 'invalid UTF-8', text: '%FF%FE' },
  { label: 'truncated escape', text: '%' },
  { label: 'truncated multi-byte', text: '%E0%A4%A' },
  { label: 'encoded slash', text: 'a%2Fb' },
  { label: 'dot dot', text: '%2E%2E' },
  { label: 'control character', text: '%01' },
  { label: 'long 257', text: 'x'.repeat(257) },
  { label: 'long 8 KB', text: 'y'.repeat(8192) },
  { label: 'emoji', text: encodeURIComponent('\u{1F600}') },
  { label: 'uuid nil', text: '00000000-0000-0000-0000-000000000000' },
  { label: 'uuid max', text: 'ffffffff-ffff-ffff-ffff-ffffffffffff' },
  { label: 'uuid upper', text: 'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF' },
  { label: '__proto__', text: '__proto__' },
  { label: 'constructor', text: 'constructor' },
  { label: 'number', text: '1e308' },
  { label: '-0', text: '-0' },
  { label: 'version 999', text: '999.999.999' },
  { label: 'sql', text: encodeURIComponent("' OR 1=1 --") },
];

/** Raw `name=value` pairs for one query parameter (arrays, objects and bad months included). */
export const QUERY_VALUES: Labelled[] = [
  ...PATH_SEGMENTS,
  { label: 'empty', text: '' },
  { label: '0000-01', text: '0000-01' },
  { label: '10000-01', text: '10000-01' },
  { label: '1969-12', text: '1969-12' },
  { label: '1970-01', text: '1970-01' },
  { label: '9999-12', text: '9999-12' },
  { label: '2026-13', text: '2026-13' },
  { label: '2026-00', text: '2026-00' },
  { label: '-2026-01', text: '-2026-01' },
  { label: '+2026-01', text: '%2B2026-01' },
  { label: '2026-01 with NUL', text: '2026-01%00' },
  { label: 'zero', text: '0' },
  { label: '-1', text: '-1' },
  { label: '101', text: '101' },
  { label: '1.5', text: '1.5' },
  { label: '2^53+1', text: '9007199254740993' },
  { label: 'NaN', text: 'NaN' },
  { label: 'Infinity', text: 'Infinity' },
  { label: 'hex', text: '0x10' },
  { label: 'base64 junk cursor', text: 'eyJpZCI6' },
  { label: 'base64 json cursor', text: Buffer.from('{"__proto__":1}').toString('base64url') },
];

const labelOf = (prefix: string) => (text: string) => ({ label: `${prefix}`, text });

const generatedStrings = fc.oneof(
  fc.string({ maxLength: 40 }).map((s) => ({ label: `string ${JSON.stringify(s)}`, text: s })),
  fc
    .string({ unit: 'binary', maxLength: 20 })
    .map((s) => ({ label: `unicode ${JSON.stringify(s)}`, text: s })),
);

/**
 * The sweep's share of the catalogue: one value of each kind, since every one of them goes to
 * every slot of every operation on every run (the random pass draws from all of them).
 */
const SWEPT = new Set([
  'null',
  'true',
  '-0',
  '1e308',
  '2^53+1',
  '2^64 as literal',
  'empty array',
  'object',
  'empty string',
  'NUL inside string',
  'lone high surrogate',
  'lone low surrogate',
  'control characters',
  'long string 300 KB',
  'month 0000-01',
  'date 10000-01-01',
  'date 1969',
  'deep object 100',
  'deep object 5000',
  'deep array 5000',
  'deep object 5000 with \\u escape',
  'deep array 2500 with __proto__',
  '__proto__ key',
  'constructor.prototype keys',
  'prototype key',
  'malformed {',
  'empty text',
  'lone surrogate escape in key',
  'NUL escape in key',
  'deep object 65',
  'NUL',
  'lone high surrogate (WTF-8)',
  'invalid UTF-8',
  'truncated escape',
  'encoded slash',
  'long 8 KB',
  'uuid nil',
  '__proto__',
  '0000-01',
  '10000-01',
  '1969-12',
  '2026-13',
  '101',
  '2^53+1',
  'NaN',
  'base64 json cursor',
  'zero',
]);
const swept = (values: Labelled[]) => values.filter((value) => SWEPT.has(value.label));
export const SWEEP_BODY_VALUES = swept(BODY_VALUES);
export const SWEEP_WHOLE_BODIES = swept(WHOLE_BODIES);
export const SWEEP_PATH_SEGMENTS = swept(PATH_SEGMENTS);
export const SWEEP_QUERY_VALUES = swept(QUERY_VALUES);

/** A JSON text fragment for a value slot: catalogued or generated. */
export const bodyValue: fc.Arbitrary<Labelled> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...BODY_VALUES) },
  generatedStrings.map(({ label, text }) => ({ label, text: JSON.stringify(text) })),
  fc.integer().map((n) => json(`integer ${n}`, n)),
  fc.double().map((n) => ({ label: `double ${String(n)}`, text: JSON.stringify(n) })),
  fc.jsonValue({ maxDepth: 4 }).map((value) => ({
    label: `json ${JSON.stringify(value).slice(0, 80)}`,
    text: JSON.stringify(value),
  })),
);

export const wholeBody: fc.Arbitrary<Labelled> = fc.constantFrom(...WHOLE_BODIES);

/** A path segment, percent-encoded. */
export const pathSegment: fc.Arbitrary<Labelled> = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...PATH_SEGMENTS) },
  generatedStrings
    .filter((s) => s.text.length > 0)
    .map(({ label, text }) => labelOf(label)(encodeUtf16(text))),
);

/** One query parameter's raw text after `name=`, or a different shape of the parameter. */
export const queryValue = (name: string): fc.Arbitrary<Labelled> =>
  fc.oneof(
    {
      weight: 3,
      arbitrary: fc
        .constantFrom(...QUERY_VALUES)
        .map((v) => ({ label: v.label, text: `${name}=${v.text}` })),
    },
    generatedStrings.map(({ label, text }) => ({ label, text: `${name}=${encodeUtf16(text)}` })),
    fc.constantFrom(
      { label: 'repeated (array)', text: `${name}=1&${name}=2` },
      { label: 'bracket array', text: `${name}[]=1` },
      { label: 'bracket object', text: `${name}[a]=1` },
      { label: 'bracket __proto__', text: `${name}[__proto__][x]=1` },
      { label: 'name only', text: name },
    ),
  );

/** The same query parameter in shapes other than one `name=value`. */
export const queryShapes = (name: string): Labelled[] => [
  { label: 'repeated (array)', text: `${name}=1&${name}=2` },
  { label: 'bracket array', text: `${name}[]=1` },
  { label: 'bracket object', text: `${name}[a]=1` },
  { label: 'bracket __proto__', text: `${name}[__proto__][x]=1` },
  { label: 'name only', text: name },
];

/**
 * Percent-encodes each UTF-16 code unit's UTF-8 (WTF-8 for lone surrogates), which
 * encodeURIComponent refuses to do for an unpaired surrogate.
 */
export function encodeUtf16(text: string): string {
  let out = '';
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (code >= 0xd800 && code <= 0xdfff) {
      out += [0xe0 | (code >> 12), 0x80 | ((code >> 6) & 0x3f), 0x80 | (code & 0x3f)]
        .map((byte) => `%${byte.toString(16).toUpperCase()}`)
        .join('');
    } else {
      out += encodeURIComponent(char);
    }
  }
  return out;
}
