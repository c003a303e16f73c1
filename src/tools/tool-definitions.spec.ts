import Ajv2020 from 'ajv/dist/2020';
import { CompiledSchemas, compileParameters, storedTools, toolProblems } from './tool-definitions';

const lookup = {
  name: 'lookup_order',
  description: 'Looks up an order',
  parameters: { type: 'object', properties: { order_id: { type: 'string' } } },
  execution: 'client',
};

describe('toolProblems', () => {
  it('accepts valid client and webhook tools', () => {
    const webhook = {
      ...lookup,
      name: 'book',
      execution: 'webhook',
      endpoint_id: '6f1c8a52-0c59-4a4e-9d3b-1b0a3f3e8c11',
    };
    expect(toolProblems([lookup, webhook], 'personality')).toEqual([]);
  });

  it('names each problem by its pointer', () => {
    expect(
      toolProblems(
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

  it('wants an endpoint for a webhook tool and none for a client tool', () => {
    expect(toolProblems([{ ...lookup, execution: 'webhook' }], 'personality')).toEqual([
      { field: 'tools/0/endpoint_id', problem: 'is required for a webhook tool' },
    ]);
    expect(toolProblems([{ ...lookup, timeout_ms: 500 }], 'personality')).toEqual([
      { field: 'tools/0/timeout_ms', problem: 'is for webhook tools only' },
    ]);
  });

  it('refuses a schema over 16 KiB', () => {
    const big = { type: 'object', description: 'x'.repeat(16 * 1024) };
    expect(toolProblems([{ ...lookup, parameters: big }], 'personality')).toEqual([
      { field: 'tools/0/parameters', problem: 'must be at most 16384 bytes serialised' },
    ]);
  });

  it('refuses execution on a per-request tool', () => {
    expect(toolProblems([lookup], 'request')).toEqual([
      { field: 'tools/0/execution', problem: 'is not a known field' },
    ]);
  });

  it('gives webhook tools their default timeout', () => {
    const webhook = { ...lookup, execution: 'webhook' as const, endpoint_id: 'e' };
    expect(storedTools([webhook])[0].timeout_ms).toBe(10_000);
  });
});

describe('regular expressions in tool schemas', () => {
  const withCode = (code: Record<string, unknown>) => ({
    ...lookup,
    parameters: { type: 'object', properties: { code } },
  });

  it('refuses pattern and patternProperties wherever they stand, naming where', () => {
    expect(toolProblems([withCode({ type: 'string', pattern: '^(a+)+$' })], 'personality')).toEqual(
      [
        {
          field: 'tools/0/parameters',
          problem:
            'must not use regular expressions (pattern, patternProperties): /properties/code/pattern',
        },
      ],
    );
    const nested = withCode({ type: 'object', patternProperties: { '^x': { type: 'string' } } });
    expect(toolProblems([nested], 'personality')[0].problem).toContain(
      '/properties/code/patternProperties',
    );
  });

  it('accepts a property named pattern, and pattern as data', () => {
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
    expect(toolProblems([tool], 'personality')).toEqual([]);
    expect(compileParameters(tool.parameters)({ pattern: 'anything', kind: 'pattern' })).toBe(true);
  });
});

describe('compileParameters', () => {
  afterEach(() => jest.restoreAllMocks());

  const schemaNumbered = (n: number) => ({
    type: 'object',
    properties: { [`field_${n}`]: { type: 'integer' } },
  });

  it('compiles a schema once, however its keys are ordered, and validates with it', () => {
    const compile = jest.spyOn(Ajv2020.prototype, 'compile');
    const schema = { type: 'object', required: ['at'], properties: { at: { type: 'string' } } };
    const reordered = { properties: { at: { type: 'string' } }, required: ['at'], type: 'object' };
    const first = compileParameters(schema);
    expect(compileParameters(reordered)).toBe(first);
    expect(toolProblems([{ ...lookup, parameters: reordered }], 'personality')).toEqual([]);
    expect(compile).toHaveBeenCalledTimes(1);
    expect(first({ at: 'noon' })).toBe(true);
    expect(first({ at: 12 })).toBe(false);
  });

  it('keeps at most its capacity, the least recently used out first', () => {
    const schemas = new CompiledSchemas(3);
    const kept = schemas.compile(schemaNumbered(0));
    const dropped = schemas.compile(schemaNumbered(1));
    schemas.compile(schemaNumbered(2));
    expect(schemas.compile(schemaNumbered(0))).toBe(kept);
    // A fourth pushes out the least recently used: 1, not 0.
    schemas.compile(schemaNumbered(3));
    const compile = jest.spyOn(Ajv2020.prototype, 'compile');
    expect(schemas.compile(schemaNumbered(0))).toBe(kept);
    expect(compile).not.toHaveBeenCalled();
    expect(schemas.compile(schemaNumbered(1))).not.toBe(dropped);
    expect(compile).toHaveBeenCalledTimes(1);
  });

  it('keeps at most its text capacity: large schemas push out the oldest', () => {
    const size = JSON.stringify(schemaNumbered(0)).length;
    const schemas = new CompiledSchemas(1_000, 2 * size);
    const first = schemas.compile(schemaNumbered(0));
    const second = schemas.compile(schemaNumbered(1));
    // A third exceeds the text kept: the oldest goes, the second stays.
    schemas.compile(schemaNumbered(2));
    expect(schemas.compile(schemaNumbered(1))).toBe(second);
    expect(schemas.compile(schemaNumbered(0))).not.toBe(first);
  });
});

describe('references in tool schemas', () => {
  const withParameters = (parameters: Record<string, unknown>) => ({ ...lookup, parameters });
  const problemOf = (parameters: Record<string, unknown>) =>
    toolProblems([withParameters(parameters)], 'personality')[0]?.problem;

  it('refuses a recursive $ref: validating it doubled the work at each level of the arguments', () => {
    const twice = {
      type: 'object',
      properties: { c: { anyOf: [{ $ref: '#' }, { $ref: '#' }] } },
    };
    expect(problemOf(twice)).toBe('must not refer to itself ($ref): /properties/c/anyOf/0/$ref');
    const itself = {
      type: 'object',
      properties: { a: { $ref: '#/$defs/a' } },
      $defs: { a: { type: 'object', allOf: [{ $ref: '#/$defs/a' }] } },
    };
    expect(problemOf(itself)).toMatch(/^must not refer to itself \(\$ref\)/);
  });

  it('refuses $defs that multiply: each referring twice to the one before', () => {
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i <= 30; i++) {
      $defs[`d${i}`] = { anyOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    }
    const multiplying = { type: 'object', properties: { x: { $ref: '#/$defs/d30' } }, $defs };
    expect(problemOf(multiplying)).toBe(
      'must have at most 2048 subschemas once its $ref are written out',
    );
  });

  it('reads the names under dependencies as names, not as data keywords', () => {
    const recursive = {
      type: 'object',
      dependencies: {
        default: { properties: { default: { anyOf: [{ $ref: '#' }, { $ref: '#' }] } } },
      },
    };
    expect(problemOf(recursive)).toBe(
      'must not refer to itself ($ref): /dependencies/default/properties/default/anyOf/0/$ref',
    );
    const regex = {
      type: 'object',
      dependencies: { default: { properties: { q: { type: 'string', pattern: '^(a+)+$' } } } },
    };
    expect(problemOf(regex)).toBe(
      'must not use regular expressions (pattern, patternProperties): /dependencies/default/properties/q/pattern',
    );
  });

  it('refuses a $ref into data, which would carry a pattern past the check', () => {
    const intoDefault = {
      type: 'object',
      properties: { a: { $ref: '#/default' } },
      default: { type: 'string', pattern: '^(a+)+$' },
    };
    expect(problemOf(intoDefault)).toBe('has a $ref to no subschema of it: /properties/a/$ref');
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
  ])('refuses %j', (property, problem) => {
    expect(problemOf({ type: 'object', properties: { p: property } })).toContain(problem);
  });

  it('accepts references a generated schema uses (a model used twice), and validates with them', () => {
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
    expect(problemOf(order)).toBeUndefined();
    const validate = compileParameters(order);
    expect(validate({ billing: { city: 'Lyon' }, shipping: { city: 'Köln', country: 'DE' } })).toBe(
      true,
    );
    expect(validate({ billing: { city: 'Lyon' }, shipping: { country: 'DE' } })).toBe(false);
    expect(validate({ billing: { city: 'Lyon', country: 'XX' }, shipping: { city: 'x' } })).toBe(
      false,
    );
    expect(validate({ billing: { city: 'a' }, shipping: { city: 'b' }, again: 1.5 })).toBe(false);
  });

  it("takes a schema whose $id is the meta-schema's without harming the next one", () => {
    const schemas = new CompiledSchemas(10);
    const meta = { type: 'object', $id: 'https://json-schema.org/draft/2020-12/schema' };
    expect(schemas.compile(meta)({})).toBe(true);
    const next = schemas.compile({ type: 'object', properties: { a: { type: 'integer' } } });
    expect([next({ a: 1 }), next({ a: 'x' })]).toEqual([true, false]);
    expect(() => schemas.compile({ type: 'object', minProperties: 'two' })).toThrow(
      /schema is invalid: data\/minProperties must be integer/,
    );
  });

  it('refuses a schema of another draft, as one it cannot check', () => {
    const draft7 = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object' };
    expect(problemOf(draft7)).toMatch(/^must be a valid JSON Schema \(draft 2020-12\)/);
  });

  it('compiles two schemas of one $id, each validating by its own rules', () => {
    const schemas = new CompiledSchemas(10);
    const id = 'https://example.com/tool';
    const strings = schemas.compile({
      $id: id,
      type: 'object',
      properties: { a: { type: 'string' } },
    });
    const numbers = schemas.compile({
      $id: id,
      type: 'object',
      properties: { a: { type: 'number' } },
    });
    expect([strings({ a: 'x' }), strings({ a: 1 })]).toEqual([true, false]);
    expect([numbers({ a: 'x' }), numbers({ a: 1 })]).toEqual([false, true]);
  });
});
