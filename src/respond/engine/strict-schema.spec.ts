import { isStrictSchema } from './openai-response-engine';

describe('isStrictSchema (OpenAI strict function tools)', () => {
  const closed = {
    type: 'object',
    properties: { id: { type: 'string' } },
    required: ['id'],
    additionalProperties: false,
  };

  it('takes closed objects whose properties are all required, all the way down', () => {
    expect(isStrictSchema(closed)).toBe(true);
    expect(
      isStrictSchema({
        ...closed,
        properties: { items: { type: 'array', items: closed } },
        required: ['items'],
      }),
    ).toBe(true);
  });

  it('refuses an open object, an optional property, or either nested', () => {
    expect(isStrictSchema({ ...closed, additionalProperties: undefined })).toBe(false);
    expect(isStrictSchema({ ...closed, required: [] })).toBe(false);
    const open = { ...closed, additionalProperties: true };
    expect(isStrictSchema({ ...closed, properties: { nested: open }, required: ['nested'] })).toBe(
      false,
    );
    expect(
      isStrictSchema({
        ...closed,
        properties: { list: { type: 'array', items: open } },
        required: ['list'],
      }),
    ).toBe(false);
  });
});
