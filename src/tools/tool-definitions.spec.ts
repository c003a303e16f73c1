import { compileParameters, storedTools, toolProblems } from './tool-definitions';

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

describe('compileParameters', () => {
  const withPattern = (pattern: string) => ({
    type: 'object',
    properties: { code: { type: 'string', pattern } },
  });

  it('matches patterns in linear time: a catastrophic one answers at once', () => {
    // JavaScript's backtracking engine would not return from this within the test's timeout.
    const validate = compileParameters(withPattern('^(a+)+$'));
    expect(validate({ code: `${'a'.repeat(5_000)}b` })).toBe(false);
    expect(validate({ code: 'aaaa' })).toBe(true);
  });

  it('refuses a pattern RE2 cannot run (a backreference), naming the field', () => {
    const tool = { ...lookup, parameters: withPattern('^(a)\\1$') };
    expect(toolProblems([tool], 'personality')).toEqual([
      {
        field: 'tools/0/parameters',
        problem: expect.stringContaining('must be a valid JSON Schema') as unknown,
      },
    ]);
  });
});
