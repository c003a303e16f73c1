import { foldConfusables } from './confusables';

describe('foldConfusables', () => {
  it('folds look-alikes of Latin letters from other scripts, as Unicode’s confusables map them', () => {
    // Cyrillic а е о р с у х і ѕ ј, Greek ο α ι ν ρ, Armenian ս օ.
    expect(foldConfusables('\u0430\u0435\u043e\u0440\u0441\u0443\u0445\u0456\u0455\u0458')).toBe(
      'aeopcyxisj',
    );
    expect(foldConfusables('\u03bf\u03b1\u03b9\u03bd\u03c1 \u057d\u0585')).toBe('oaivp uo');
  });

  it('reads capitals as the letters they look like, a capital I as "i"', () => {
    // Cyrillic А В Е Н К М О Р Т, Cyrillic І and Greek Ι (the table's prototype for both is "l").
    expect(
      foldConfusables('\u0410\u0412\u0415\u041d\u041a\u041c\u041e\u0420\u0422 \u0406\u0399'),
    ).toBe('abehkmopt ii');
  });

  it('leaves ASCII and letters without a Latin look-alike as they are', () => {
    expect(foldConfusables('m 1 I 0 | rn kill')).toBe('m 1 I 0 | rn kill');
    expect(foldConfusables('\u0438\u0432\u0436 \u4eca\u65e5 \ud83d\udd2a')).toBe(
      '\u0438\u0432\u0436 \u4eca\u65e5 \ud83d\udd2a',
    );
  });

  it('folds look-alikes the table leaves out, as evaders use them (review)', () => {
    // Lower-case Cyrillic к, м, т and п, Greek κ; small capitals; negative squared letters.
    expect(foldConfusables('\u043aill \u043cyself \u03bai\u043f')).toBe('kill myself kin');
    expect(foldConfusables('\u1d0b\u026a\u029f\u029f')).toBe('kill');
    expect(foldConfusables('\ud83c\udd7a\ud83c\udd78\ud83c\udd7b\ud83c\udd7b')).toBe('kill');
    // A flag is two regional indicators, no word.
    expect(foldConfusables('\ud83c\uddee\ud83c\uddf9')).toBe('\ud83c\uddee\ud83c\uddf9');
  });
});
