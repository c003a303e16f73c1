import {
  FORBIDDEN_KEYS,
  findUnsafeContent,
  isStorableJson,
  isStorableText,
  jsonNestsDeeperThan,
  mayHoldUnsafeContent,
  jsonShapeExcess,
  MAX_JSON_CONTAINERS,
  MAX_JSON_VALUES,
  noWidthSpent,
  widthExcess,
} from './untrusted-json';

const bytes = (text: string) => Buffer.from(text, 'utf8');

describe('jsonNestsDeeperThan', () => {
  it.each([
    ['{}', 1, false],
    ['{"a":{}}', 1, true],
    ['{"a":[1,{"b":[]}]}', 4, false],
    ['{"a":[1,{"b":[]}]}', 3, true],
    // Brackets in strings, escaped quotes and escaped backslashes are text.
    ['{"a":"[[[{{{"}', 1, false],
    ['{"a":"\\"[[[","b":"\\\\"}', 1, false],
    ['{"a":"\\\\","b":[[]]}', 2, true],
  ])('%s deeper than %i: %s', (text, max, expected) => {
    expect(jsonNestsDeeperThan(bytes(text), max)).toBe(expected);
  });

  it('scans a 100,000-level body without recursion', () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    expect(jsonNestsDeeperThan(bytes(deep), 64)).toBe(true);
    expect(jsonNestsDeeperThan(bytes(deep), 100_000)).toBe(false);
  });
});

describe('jsonShapeExcess', () => {
  const limits = { depth: 4, objectKeys: 2, keySquares: 8 };
  const object = (keys: number) =>
    `{${Array.from({ length: keys }, (_, i) => `"k${i}":${i}`).join(',')}}`;

  it.each([
    ['{"a":1,"b":2}', undefined],
    ['{"a":1,"b":2,"c":3}', 'object_keys'],
    // Colons in strings, keys and values alike, are text; an array's items are not keys.
    ['{"a:b":"c:d:e","f":[1,2,3,4,5,6]}', undefined],
    ['{"a":"\\\\","b":":","c":3}', 'object_keys'],
    // Each object counts its own keys, and their square toward the body's (4 + 4 + 1 > 8).
    ['[{"a":1,"b":2},{"c":3,"d":4}]', undefined],
    ['[{"a":1,"b":2},{"c":3,"d":4},{"e":5}]', 'key_squares'],
    ['[{"a":1},{"b":2},{"c":3},{"d":4},{"e":5},{"f":6},{"g":7},{"h":8}]', undefined],
    ['{"a":{"b":1,"c":2},"d":3}', undefined],
    ['{"a":{"b":1,"c":2},"d":3,"e":{}}', 'object_keys'],
    // A key written twice counts twice: the text is bounded, whatever JSON.parse keeps.
    ['{"a":1,"a":2,"a":3}', 'object_keys'],
    ['[[[[[]]]]]', 'depth'],
  ])('%s: %s', (text, expected) => {
    expect(jsonShapeExcess(bytes(text), limits)).toBe(expected);
  });

  it.each([
    // The outer array counts too.
    ['[{},[]]', undefined],
    ['[{},[],{}]', 'containers'],
    // Brackets and commas in strings are text.
    ['["{[,,,,,,,,]}","[[[[","{{{{"]', undefined],
    // Values counted by their commas, with one more per object or array (4 + 1 > 5).
    ['[1,2,3,4,5]', undefined],
    ['{"a":[1,2,3,4,5]}', 'values'],
    ['{"a":1,"b":[2,3]}', undefined],
  ])('%s, at 3 objects and arrays and 5 values: %s', (text, expected) => {
    expect(jsonShapeExcess(bytes(text), { depth: 4, containers: 3, values: 5 })).toBe(expected);
  });

  it("takes the largest bodies the API's own limits make likely, at the body's bounds", () => {
    const limits = {
      depth: 64,
      containers: MAX_JSON_CONTAINERS,
      values: MAX_JSON_VALUES,
    };
    // A round's 64 tool outputs of 16 KiB, each rows of 33 bytes: about 32,000 objects.
    const rows = (count: number) =>
      Array.from({ length: count }, (_, i) => ({ id: i, name: 'abcdefghijkl' }));
    const outputs = Array.from({ length: 64 }, (_, i) => ({
      tool_call_id: `call_${i}`,
      output: rows(495),
    }));
    expect(Buffer.byteLength(JSON.stringify(outputs[0].output))).toBeLessThan(16 * 1_024);
    expect(jsonShapeExcess(bytes(JSON.stringify({ outputs })), limits)).toBeUndefined();
    // 32 tools of 16 KiB schemas as dense as the tools spec's (ajv's if/then conditions).
    const tools = Array.from({ length: 32 }, (_, n) => ({
      name: `slow_${n}`,
      parameters: {
        type: 'object',
        allOf: Array.from({ length: 180 }, (_, i) => ({
          if: { properties: { a: { const: i } } },
          then: { required: ['b'] },
        })),
      },
    }));
    expect(jsonShapeExcess(bytes(JSON.stringify({ tools })), limits)).toBeUndefined();
  });

  it('counts 330,000 empty objects, about 1 MiB, and stops at the limits', () => {
    const empties = bytes(`{"x":[${Array.from({ length: 330_000 }, () => '{}').join(',')}]}`);
    expect(jsonShapeExcess(empties, { depth: 64, containers: 50_000 })).toBe('containers');
    expect(jsonShapeExcess(empties, { depth: 64, values: 200_000 })).toBe('values');
    expect(jsonShapeExcess(empties, { depth: 64 })).toBeUndefined();
  });

  it('counts 90,000 keys in one object in one pass, and stops at the limit', () => {
    const wide = bytes(object(90_000));
    expect(jsonShapeExcess(wide, { depth: 64, objectKeys: 1_000 })).toBe('object_keys');
    expect(jsonShapeExcess(wide, { depth: 64 })).toBeUndefined();
    expect(jsonShapeExcess(bytes(object(1_000)), { depth: 64, objectKeys: 1_000 })).toBeUndefined();
  });
});

describe('widthExcess (a parsed value)', () => {
  const keys = (count: number) =>
    Object.fromEntries(Array.from({ length: count }, (_, i) => [`k${i}`, 0]));

  it.each([
    [{ a: keys(1_000) }, undefined],
    [{ a: [keys(10), { b: keys(1_001) }] }, 'object_keys'],
    [{ a: Array.from({ length: 4 }, () => keys(999)) }, undefined],
    [{ a: Array.from({ length: 5 }, () => keys(999)) }, 'key_squares'],
    [Array.from({ length: 20_000 }, () => ({ a: 1 })), undefined],
    [Array.from({ length: 50_000 }, () => ({ a: 1 })), 'containers'],
    ['text', undefined],
  ])('%#: %s', (value, expected) => {
    expect(widthExcess(value)).toBe(expected);
  });

  it('counts the squares of values checked with one budget together (a document)', () => {
    const spent = noWidthSpent();
    for (let i = 0; i < 4; i++) expect(widthExcess({ voice: keys(999) }, spent)).toBeUndefined();
    expect(widthExcess({ voice: keys(999) }, spent)).toBe('key_squares');
    expect(widthExcess({ voice: keys(999) })).toBeUndefined();
  });

  it('counts objects, arrays and values across the values checked with one budget', () => {
    const empties = (count: number) => ({ tools: Array.from({ length: count }, () => ({})) });
    // The personality and its list count too: 2 + 49,998 objects and arrays.
    expect(widthExcess(empties(49_998))).toBeUndefined();
    expect(widthExcess(empties(49_999))).toBe('containers');
    const spent = noWidthSpent();
    expect(widthExcess({ list: new Array(110_000).fill(0) }, spent)).toBeUndefined();
    expect(widthExcess({ list: new Array(110_000).fill(0) }, spent)).toBe('values');
  });
});

describe('isStorableText', () => {
  it.each([
    ['plain', true],
    ['emoji \ud83d\ude00', true],
    ['nul \u0000', false],
    ['high \ud800 alone', false],
    ['low \udc00 alone', false],
    ['reversed \ude00\ud83d', false],
  ])('%j: %s', (text, expected) => {
    expect(isStorableText(text)).toBe(expected);
  });
});

describe('isStorableJson', () => {
  it.each([
    [{ a: ['b', { c: 'd \ud83d\ude00' }], constructor: 1 }, true],
    [null, true],
    [42, true],
    ['nul \u0000', false],
    [{ a: [1, { b: 'x\ud800' }] }, false],
    [{ 'key \u0000': 1 }, false],
    [[['deep', ['\udc00']]], false],
  ])('%j: %s', (value, expected) => {
    expect(isStorableJson(value)).toBe(expected);
  });
});

describe('findUnsafeContent', () => {
  it('names the field of a forbidden key or unstorable string at any depth', () => {
    expect(findUnsafeContent(JSON.parse('{"a":{"b":[{"__proto__":1}]}}'))).toEqual({
      field: 'a.b.0.__proto__',
      problem: 'is not an allowed key',
    });
    expect(findUnsafeContent({ a: { constructor: 1 } })?.field).toBe('a.constructor');
    expect(findUnsafeContent({ a: ['x', 'y\u0000'] })?.field).toBe('a.1');
    expect(findUnsafeContent({ ['k\ud800']: 1 })?.field).toBe('body');
    expect(findUnsafeContent({ a: [1, { b: 'ok' }], c: null })).toBeNull();
  });

  it("refuses Object.prototype's members, which class-transformer drops, at any depth (review)", () => {
    for (const key of [
      'toString',
      'valueOf',
      'hasOwnProperty',
      'toLocaleString',
      '__defineSetter__',
    ]) {
      expect(findUnsafeContent({ metadata: { a: [{ [key]: 1 }] } })).toEqual({
        field: `metadata.a.0.${key}`,
        problem: 'is not an allowed key',
      });
    }
    expect(findUnsafeContent({ metadata: { toStringy: 1, value: 2, __x: 3 } })).toBeNull();
  });

  it('is looked for in every body that may hold a forbidden key (mayHoldUnsafeContent)', () => {
    for (const key of FORBIDDEN_KEYS) {
      expect(mayHoldUnsafeContent(bytes(JSON.stringify({ a: { [key]: 1 } })))).toBe(true);
    }
    expect(mayHoldUnsafeContent(bytes('{"user_id":"plain","metadata":{"a":1}}'))).toBe(false);
  });

  it('bounds the field name it echoes', () => {
    const problem = findUnsafeContent({ ['x'.repeat(10_000)]: { prototype: 1 } });
    expect(problem?.field.length).toBeLessThanOrEqual(200);
  });
});
