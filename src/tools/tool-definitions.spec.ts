import { storedTools, toolProblems } from './tool-definitions';
import { toolSchemas } from './tool-schemas';

const ORG = { organizationId: 'organization-a', account: 'user-a' };

afterAll(() => toolSchemas.close());

/** Whether `args` validate against `schema`, as a tool call's arguments are checked. */
const validates = async (schema: object, args: unknown) =>
  (await toolSchemas.validate(ORG, schema, args)).valid;

const lookup = {
  name: 'lookup_order',
  description: 'Looks up an order',
  parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
  execution: 'client',
};

describe('toolProblems', () => {
  it('accepts valid client and webhook tools', async () => {
    const webhook = {
      ...lookup,
      name: 'book',
      execution: 'webhook',
      endpoint_id: '6f1c8a52-0c59-4a4e-9d3b-1b0a3f3e8c11',
    };
    expect(await toolProblems(ORG, [lookup, webhook], 'personality')).toEqual([]);
  });

  it('names each problem by its pointer', async () => {
    expect(
      await toolProblems(
        ORG,
        [
          lookup,
          { ...lookup, name: 'bad name!' },
          { ...lookup, name: 'x', parameters: { type: 'string' } },
          { ...lookup, name: 'y', parameters: { type: 'object', minProperties: 'two' } },
          lookup,
          { ...lookup, name: 'z', extra: 1 },
        ],
        'personality',
      ),
    ).toEqual([
      { field: 'tools/1/name', problem: 'must match pattern "^[A-Za-z0-9_-]{1,64}$"' },
      { field: 'tools/2/parameters', problem: 'must be a JSON Schema of type "object"' },
      {
        field: 'tools/3/parameters',
        problem: expect.stringMatching(/^must be a valid JSON Schema/),
      },
      { field: 'tools/4/name', problem: 'must be unique' },
      { field: 'tools/5/extra', problem: 'is not a known field' },
    ]);
  });

  it('wants an endpoint for a webhook tool and none for a client tool', async () => {
    expect(await toolProblems(ORG, [{ ...lookup, execution: 'webhook' }], 'personality')).toEqual([
      { field: 'tools/0/endpoint_id', problem: 'is required for a webhook tool' },
    ]);
    expect(await toolProblems(ORG, [{ ...lookup, timeout_ms: 500 }], 'personality')).toEqual([
      { field: 'tools/0/timeout_ms', problem: 'is for webhook tools only' },
    ]);
  });

  it('refuses a schema over 16 KiB', async () => {
    const big = { type: 'object', description: 'x'.repeat(16 * 1024) };
    expect(await toolProblems(ORG, [{ ...lookup, parameters: big }], 'personality')).toEqual([
      { field: 'tools/0/parameters', problem: 'must be at most 16384 bytes serialised' },
    ]);
  });

  it('refuses a number JSON cannot write: as text it is null, and another schema (review)', async () => {
    // `{"not":{"const":1e999}}` parses to Infinity; its JSON is `{"not":{"const":null}}`, the
    // compiled-schema cache's key of another organization's opposite schema.
    const unwritable = {
      type: 'object',
      properties: { x: { not: { const: JSON.parse('1e999') as number } } },
    };
    expect(await toolProblems(ORG, [{ ...lookup, parameters: unwritable }], 'personality')).toEqual(
      [
        {
          field: 'tools/0/parameters',
          problem: 'must hold only numbers JSON can write (not 1e999): /properties/x/not/const',
        },
      ],
    );
  });

  it('refuses execution on a per-request tool', async () => {
    expect(await toolProblems(ORG, [lookup], 'request')).toEqual([
      { field: 'tools/0/execution', problem: 'is not a known field' },
    ]);
  });

  it('gives webhook tools their default timeout', async () => {
    const webhook = { ...lookup, execution: 'webhook' as const, endpoint_id: 'e' };
    expect(storedTools([webhook])[0].timeout_ms).toBe(10_000);
  });
});

describe('regular expressions in tool schemas', () => {
  const withCode = (code: Record<string, unknown>) => ({
    ...lookup,
    parameters: { type: 'object', properties: { code } },
  });

  it('refuses pattern and patternProperties wherever they stand, naming where', async () => {
    expect(
      await toolProblems(ORG, [withCode({ type: 'string', pattern: '^(a+)+$' })], 'personality'),
    ).toEqual([
      {
        field: 'tools/0/parameters',
        problem:
          'must not use regular expressions (pattern, patternProperties): /properties/code/pattern',
      },
    ]);
    const nested = withCode({ type: 'object', patternProperties: { '^x': { type: 'string' } } });
    expect((await toolProblems(ORG, [nested], 'personality'))[0].problem).toContain(
      '/properties/code/patternProperties',
    );
  });

  it('accepts a property named pattern, and pattern as data', async () => {
    const tool = {
      ...lookup,
      parameters: {
        type: 'object',
        properties: {
          pattern: { type: 'string', default: 'pattern', examples: [{ pattern: 'x' }] },
          kind: { enum: ['pattern'], const: 'pattern' },
        },
      },
    };
    expect(await toolProblems(ORG, [tool], 'personality')).toEqual([]);
    expect(await validates(tool.parameters, { pattern: 'anything', kind: 'pattern' })).toBe(true);
  });
});

describe('references in tool schemas', () => {
  const withParameters = (parameters: Record<string, unknown>) => ({ ...lookup, parameters });
  const problemOf = async (parameters: Record<string, unknown>) =>
    (await toolProblems(ORG, [withParameters(parameters)], 'personality'))[0]?.problem;

  it('refuses a recursive $ref: validating it doubled the work at each level of the arguments', async () => {
    const twice = {
      type: 'object',
      properties: { c: { anyOf: [{ $ref: '#' }, { $ref: '#' }] } },
    };
    expect(await problemOf(twice)).toBe(
      'must not refer to itself ($ref): /properties/c/anyOf/0/$ref',
    );
    const itself = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/a' } },
      $defs: { a: { type: 'object', allOf: [{ $ref: '#/$defs/a' }] } },
    };
    expect(await problemOf(itself)).toMatch(/^must not refer to itself \(\$ref\)/);
  });

  it('refuses $defs that multiply: each referring twice to the one before', async () => {
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i <= 30; i++) {
      $defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    }
    const multiplying = { type: 'object', properties: { x: { $ref: '#/$defs/d30' } }, $defs };
    expect(await problemOf(multiplying)).toBe(
      'must have at most 2048 subschemas once its $ref are written out',
    );
  });

  it('reads the names under dependencies as names, not as data keywords', async () => {
    const recursive = {
      type: 'object',
      dependencies: {
        default: { properties: { default: { anyOf: [{ $ref: '#' }, { $ref: '#' }] } } },
      },
    };
    expect(await problemOf(recursive)).toBe(
      'must not refer to itself ($ref): /dependencies/default/properties/default/anyOf/0/$ref',
    );
    const regex = {
      type: 'object',
      dependencies: { default: { properties: { q: { type: 'string', pattern: '^(a+)+$' } } } },
    };
    expect(await problemOf(regex)).toBe(
      'must not use regular expressions (pattern, patternProperties): /dependencies/default/properties/q/pattern',
    );
  });

  it('refuses an asynchronous schema: its validation is a promise no tool call waits for', async () => {
    expect(await problemOf({ type: 'object', $async: true })).toBe(
      'must not be asynchronous ($async): /$async',
    );
  });

  it('refuses a $ref into data, which would carry a pattern past the check', async () => {
    const intoDefault = {
      type: 'object',
      properties: { a: { $ref: '#/default' } },
      default: { type: 'string', pattern: '^(a+)+$' },
    };
    expect(await problemOf(intoDefault)).toBe(
      'has a $ref to no subschema of it: /properties/a/$ref',
    );
  });

  it.each([
    [{ $ref: 'https://example.com/schema.json' }, 'must use $ref with a JSON pointer'],
    [{ $ref: '#anchor' }, 'must use $ref with a JSON pointer'],
    [{ $ref: '#/%E0%A4%A' }, 'must use $ref with a JSON pointer'],
    [{ $ref: '#/$defs/missing' }, 'has a $ref to no subschema of it'],
    [{ $dynamicRef: '#node' }, 'must not use dynamic references or anchors'],
    [{ $dynamicAnchor: 'node', type: 'object' }, 'must not use dynamic references or anchors'],
    [{ $recursiveAnchor: true, type: 'object' }, 'must not use dynamic references or anchors'],
    // To ajv `#/` is the root, and `%2F` a slash within a key: neither is taken.
    [{ anyOf: [{ $ref: '#/' }, { $ref: '#/' }] }, 'must use $ref with a JSON pointer'],
    [{ $ref: '#/$defs/a%2Fb' }, 'must use $ref with a JSON pointer'],
    [{ $id: 'https://example.com/other', type: 'string' }, 'must not use $id below its root'],
    [{ $async: true, type: 'string' }, 'must not be asynchronous ($async): /properties/p/$async'],
  ])('refuses %j', async (property, problem) => {
    expect(await problemOf({ type: 'object', properties: { p: property } })).toContain(problem);
  });

  it('accepts references a generated schema uses (a model used twice), and validates with them', async () => {
    const order = {
      type: 'object',
      $id: 'https://example.com/order',
      required: ['billing', 'shipping'],
      properties: {
        billing: { $ref: '#/$defs/Address' },
        shipping: { $ref: '#/$defs/Address' },
        'a/b~c': { type: 'integer' },
        again: { $ref: '#/properties/a~1b~0c' },
      },
      $defs: {
        Address: {
          type: 'object',
          required: ['city'],
          properties: { city: { type: 'string' }, country: { $ref: '#/$defs/Country' } },
        },
        Country: { enum: ['FR', 'DE'] },
      },
    };
    expect(await problemOf(order)).toBeUndefined();
    const valid = (args: unknown) => validates(order, args);
    expect(
      await valid({ billing: { city: 'Lyon' }, shipping: { city: 'Köln', country: 'DE' } }),
    ).toBe(true);
    expect(await valid({ billing: { city: 'Lyon' }, shipping: { country: 'DE' } })).toBe(false);
    expect(await valid({ billing: { city: 'Lyon', country: 'XX' }, shipping: { city: 'x' } })).toBe(
      false,
    );
    expect(await valid({ billing: { city: 'a' }, shipping: { city: 'b' }, again: 1.5 })).toBe(
      false,
    );
  });

  it("takes a schema whose $id is the meta-schema's without harming the next one", async () => {
    const meta = { type: 'object', $id: 'https://json-schema.org/draft/2020-12/schema' };
    expect(await validates(meta, {})).toBe(true);
    const next = { type: 'object', properties: { a: { type: 'integer' } } };
    expect([await validates(next, { a: 1 }), await validates(next, { a: 'x' })]).toEqual([
      true,
      false,
    ]);
    expect(await problemOf({ type: 'object', minProperties: 'two' })).toMatch(
      /schema is invalid: data\/minProperties must be integer/,
    );
  });

  it('refuses a schema of another draft, as one it cannot check', async () => {
    const draft7 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' };
    expect(await problemOf(draft7)).toMatch(/^must be a valid JSON Schema \(draft 2020-12\)/);
  });

  it('compiles two schemas of one $id, each validating by its own rules', async () => {
    const id = 'https://example.com/tool';
    const strings = { $id: id, type: 'object', properties: { a: { type: 'string' } } };
    const numbers = { $id: id, type: 'object', properties: { a: { type: 'number' } } };
    expect([await validates(strings, { a: 'x' }), await validates(strings, { a: 1 })]).toEqual([
      true,
      false,
    ]);
    expect([await validates(numbers, { a: 'x' }), await validates(numbers, { a: 1 })]).toEqual([
      false,
      true,
    ]);
  });
});
