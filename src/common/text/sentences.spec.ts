import { MAX_MEMORY_PARTS, memoryParts } from './sentences';

describe('memoryParts', () => {
  it('embeds one sentence whole, alone', () => {
    expect(memoryParts('My car is an old blue Volvo that keeps breaking down.')).toEqual([
      'My car is an old blue Volvo that keeps breaking down.',
    ]);
  });

  it('embeds several sentences whole and one by one, line breaks ending them too', () => {
    const text =
      'I have so much to do this month. My brother Luca is getting married in June!\nWhat a year';
    expect(memoryParts(text)).toEqual([
      text,
      'I have so much to do this month.',
      'My brother Luca is getting married in June!',
      'What a year',
    ]);
  });

  it('puts a sentence of fewer than three words with the next, the last with the one before', () => {
    expect(memoryParts('Hi! My sister is called Clara. She is older. Bye.')).toEqual([
      'Hi! My sister is called Clara. She is older. Bye.',
      'Hi! My sister is called Clara.',
      'She is older. Bye.',
    ]);
    expect(memoryParts('Hi there. Bye now.')).toEqual(['Hi there. Bye now.']);
  });

  it('counts the words of a language written without spaces', () => {
    const text = '私は猫が大好きです。 来月、兄が結婚します。';
    expect(memoryParts(text)).toEqual([text, '私は猫が大好きです。', '来月、兄が結婚します。']);
  });

  it('keeps at most MAX_MEMORY_PARTS parts, the last holding the rest', () => {
    const sentences = Array.from({ length: 12 }, (_, i) => `This is sentence number ${i}.`);
    const parts = memoryParts(sentences.join(' '));
    expect(parts).toHaveLength(MAX_MEMORY_PARTS);
    expect(parts.slice(1, -1)).toEqual(sentences.slice(0, MAX_MEMORY_PARTS - 2));
    expect(parts[MAX_MEMORY_PARTS - 1]).toBe(sentences.slice(MAX_MEMORY_PARTS - 2).join(' '));
  });
});
