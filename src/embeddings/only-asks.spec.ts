import { onlyAsks } from './only-asks';

describe('onlyAsks', () => {
  it.each([
    'What kind of car do I drive?',
    '  Do you remember what my sister is called?  ',
    'Really??',
    '¿Dónde nací?',
    '我的猫几岁了？',
    'أين أعيش؟',
  ])('a bare question only asks: %j', (text) => {
    expect(onlyAsks(text)).toBe(true);
  });

  it.each([
    'My car is an old blue Volvo.',
    'My car broke down again. Should I sell it?',
    'I love it! Do you?',
    'Is it the one... the blue one?',
    'So tired today\nwhat should I do?',
    'So tired today\r\nwhat should I do?',
    'Why? I never said that.',
    'I moved to Canada last year, did I tell you?',
    'Mi hermana se llama Clara, ¿te acuerdas?',
    '我住在上海，你呢？',
    'أسكن في القاهرة، وأنت؟',
    'میرا نام علی ہے۔ آپ کا نام کیا ہے؟',
    'मेरा नाम राम है। आपका नाम क्या है?',
    'Got the job 🎉 can you believe it?',
    'I passed‼ Can you believe it?',
    'so my sister clara got engaged and the wedding is in june in lisbon any tips?',
    'is it normal that my dog Pixel sleeps all day now?',
    '?',
    '  ?? ',
    '',
  ])('anything else may tell something: %j', (text) => {
    expect(onlyAsks(text)).toBe(false);
  });

  it('reads long runs of question marks (a backtracking pattern would not end in time)', () => {
    expect(onlyAsks(`${'?'.repeat(200_000)}x`)).toBe(false);
    expect(onlyAsks(`Why${'?'.repeat(200_000)}`)).toBe(true);
    expect(onlyAsks(`${'a '.repeat(100_000)}?`)).toBe(false);
  });
});
