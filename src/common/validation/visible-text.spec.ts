import { validate } from 'class-validator';
import { HasVisibleText, hasVisibleText } from './visible-text';

class Named {
  @HasVisibleText()
  name: string;
}

const named = (name: string) => Object.assign(new Named(), { name });

describe('HasVisibleText', () => {
  it.each([
    ['spaces', '   '],
    ['a no-break space and an ideographic space', '\u00a0\u3000'],
    ['zero-width characters', '\u200b\u200c\u200d\ufeff'],
    ['a Hangul filler', '\u3164'],
    ['a Braille blank', '\u2800\u2800'],
    ['a right-to-left mark and a tab', '\u200f\t'],
    ['combining marks alone', '\u0334\u0334'],
    ['a line separator and a soft hyphen', '\u2028\u00ad'],
  ])('refuses a name of %s', async (_, value) => {
    expect(hasVisibleText(value)).toBe(false);
    const problems = await validate(named(value));
    expect(problems).toHaveLength(1);
    expect(problems[0].constraints).toEqual({
      hasVisibleText: 'name must hold a visible character, not only spaces or invisible ones',
    });
  });

  it.each([
    ['a Latin name with spaces around', '  Acme  '],
    ['Hebrew with a right-to-left mark', '\u200fשלום'],
    ['one emoji', '🍵'],
    ['a CJK name', '東京支店'],
    ['a single combining-free digit', '7'],
  ])('takes %s', async (_, value) => {
    expect(hasVisibleText(value)).toBe(true);
    expect(await validate(named(value))).toEqual([]);
  });
});
