import { collapseRepeats, TextNormalizer } from './text-normalizer';

describe('TextNormalizer', () => {
  const normalizer = new TextNormalizer(new Set(['i', 'want', 'to', 'die', 'kil', 'myself']));
  const words = (text: string) => normalizer.words(text);

  it('folds case, compatibility forms and accents', () => {
    expect(words('ＫＩＬＬ 𝐦𝐲𝐬𝐞𝐥𝐟')).toEqual(['kil', 'myself']);
    expect(words('Ich möchte nicht, weißt du')).toEqual(['ich', 'mochte', 'nicht', 'weist', 'du']);
    expect(words('sœur, ÉLÈVE, niño')).toEqual(['soeur', 'eleve', 'nino']);
    expect(words('sui\u200bcide s\u00adelf')).toEqual(['suicide', 'self']);
  });

  it('reads leetspeak inside words, and keeps numbers numbers', () => {
    expect(words('k1ll d13 $uicide m@ke k!ll ki11')).toEqual([
      'kil',
      'die',
      'suicide',
      'make',
      'kil',
      'kil',
    ]);
    expect(normalizer.normalize('14yo 3.5 $5').tokens).toEqual([
      expect.objectContaining({ text: '14', isNumber: true }),
      expect.objectContaining({ text: 'yo', isNumber: false }),
      expect.objectContaining({ text: '3.5', isNumber: true }),
      expect.objectContaining({ text: '5', isNumber: true }),
    ]);
  });

  it('collapses repeated letters but not digits', () => {
    expect(collapseRepeats('diiiiie')).toBe('die');
    expect(collapseRepeats('kill')).toBe('kil');
    expect(collapseRepeats('111')).toBe('111');
    expect(words('sooo tired')).toEqual(['so', 'tired']);
  });

  it('joins English contractions and restores French elisions', () => {
    expect(words("don't can’t i'm i'll")).toEqual(['dont', 'cant', 'im', 'i', 'wil']);
    expect(words("j'ai envie d'en finir qu’elle")).toEqual([
      'je',
      'ai',
      'envie',
      'de',
      'en',
      'finir',
      'que',
      'ele',
    ]);
  });

  it('expands chat spellings', () => {
    expect(words('wanna kms jveux g envie')).toEqual([
      'want',
      'to',
      'kil',
      'myself',
      'je',
      'veux',
      'je',
      'ai',
      'envie',
    ]);
  });

  it('joins three or more spaced or dotted letters, into known words when they spell them', () => {
    expect(words('k i l l myself')).toEqual(['kil', 'myself']);
    expect(words('s.u.i.c.i.d.e')).toEqual(['suicide']);
    expect(words('s-u-i-c-i-d-e')).toEqual(['suicide']);
    expect(words('i w a n t t o d i e')).toEqual(['i', 'want', 'to', 'die']);
    // Two single letters are ordinary text; so are letters separated by other words.
    expect(words('il y a')).toEqual(['il', 'y', 'a']);
    expect(words('a b and c')).toEqual(['a', 'b', 'and', 'c']);
  });

  it('records sentence and clause breaks, not inside decimals', () => {
    const tokens = normalizer.normalize('one, two. three 3.5 four! five\nsix').tokens;
    expect(tokens.map((token) => [token.text, token.breakBefore])).toEqual([
      ['one', 0],
      ['two', 1],
      ['thre', 2],
      ['3.5', 0],
      ['four', 0],
      ['five', 2],
      ['six', 2],
    ]);
  });

  it('marks quoted spans, with double quotes, guillemets and single quotes', () => {
    const { tokens, quoteStarts, quoteEnds } = normalizer.normalize(
      `she said "i want to die" and « je veux » then 'so long' isn't it`,
    );
    expect(tokens.map((token) => `${token.text}${token.quote ? `^${token.quote}` : ''}`)).toEqual([
      'she',
      'said',
      'i^1',
      'want^1',
      'to^1',
      'die^1',
      'and',
      'je^2',
      'veux^2',
      'then',
      'so^3',
      'long^3',
      'isnt',
      'it',
    ]);
    expect(quoteStarts).toEqual([-1, 2, 7, 10]);
    expect(quoteEnds).toEqual([-1, 6, 9, 12]);
  });

  it('ends an unclosed quotation with its line', () => {
    const tokens = normalizer.normalize('"i want to die\nok').tokens;
    expect(tokens.map((token) => token.quote)).toEqual([1, 1, 1, 1, 0]);
  });

  it('reads a few emoji as words and drops the rest', () => {
    expect(words('🔪 him 😂 💀💀 🙂')).toEqual(['knife', 'him', 'lol']);
    expect(words('😭😭😭')).toEqual([]);
  });

  it('keeps other scripts as words without mistaking them', () => {
    expect(words('Привет мир')).toEqual(['привет', 'мир']);
    expect(words('今日は。晴れ')).toEqual(['今日は', '晴れ']);
  });
});
