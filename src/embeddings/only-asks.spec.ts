import { onlyAsks } from './only-asks';

describe('onlyAsks', () => {
  it.each([
    'What kind of car do I drive?',
    '  Do you remember what my sister is called?  ',
    'Really??',
    '¿Dónde nací?',
    '我的猫几岁了？',
    'أين أعيش؟',
  ])('a single question only asks: %j', (text) => {
    expect(onlyAsks(text)).toBe(true);
  });

  it.each([
    'My car is an old blue Volvo.',
    'My car broke down again. Should I sell it?',
    'I love it! Do you?',
    'Is it the one... the blue one?',
    'So tired today\nwhat should I do?',
    'Why? I never said that.',
    '?',
    '',
  ])('anything else tells something, or nothing to embed apart: %j', (text) => {
    expect(onlyAsks(text)).toBe(false);
  });
});
