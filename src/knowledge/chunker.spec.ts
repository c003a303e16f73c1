import fc from 'fast-check';
import { chunkText } from './chunker';

/**
 * What chunkText did with regular expressions until it read by positions (review, 2026-12-05:
 * too slow on 1 MiB of tiny sentences): the statement of its behaviour, kept as the reference.
 */
function chunkTextByExpressions(text: string, max: number): string[] {
  const splitWords = (piece: string): string[] => {
    const parts: string[] = [];
    let rest = piece;
    while (rest.length > max) {
      // The last white space at or before `max` (as \s and String#trim have it), or -1.
      let space = Math.min(max, rest.length - 1);
      while (space > 0 && !/\s/.test(rest[space])) space -= 1;
      let cut = space > 0 ? space : max;
      const code = rest.charCodeAt(cut - 1);
      if (space <= 0 && code >= 0xd800 && code <= 0xdbff) cut -= 1;
      parts.push(rest.slice(0, cut).trim());
      rest = rest.slice(cut).trim();
    }
    if (rest) parts.push(rest);
    return parts;
  };
  const chunks: string[] = [];
  let current = '';
  let separator = '';
  const add = (piece: string, joiner: string) => {
    if (current && current.length + joiner.length + piece.length <= max) {
      current += joiner + piece;
      return;
    }
    if (current) chunks.push(current);
    current = piece;
  };
  for (const paragraph of text.replace(/\r\n?/g, '\n').split(/\n[ \t\f\v\r]*\n/)) {
    const trimmed = paragraph.trim();
    if (!trimmed) continue;
    const pieces =
      trimmed.length <= max
        ? [trimmed]
        : trimmed
            .split(/(?<=[.!?…])\s+|(?<=[。！？])/u)
            .map((sentence) => sentence.trim())
            .filter((sentence) => sentence.length > 0)
            .flatMap(splitWords);
    pieces.forEach((piece, index) => add(piece, index === 0 ? separator : ' '));
    separator = '\n\n';
  }
  if (current) chunks.push(current);
  return chunks;
}

describe('chunkText', () => {
  it('puts short paragraphs together, a blank line between them', () => {
    expect(chunkText('First paragraph.\n\nSecond one.\r\n\r\nThird.', 100)).toEqual([
      'First paragraph.\n\nSecond one.\n\nThird.',
    ]);
  });

  it('starts a new chunk at a paragraph that would not fit', () => {
    const a = 'a'.repeat(30);
    const b = 'b'.repeat(30);
    expect(chunkText(`${a}\n\n${b}\n\n${a}`, 65)).toEqual([`${a}\n\n${b}`, a]);
  });

  it('splits a long paragraph on sentence boundaries, never inside a sentence', () => {
    const sentences = ['We open at nine.', 'We close at six!', 'Are we open on Sunday?', 'No.'];
    const chunks = chunkText(sentences.join(' '), 40);
    expect(chunks).toEqual(['We open at nine. We close at six!', 'Are we open on Sunday? No.']);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(40);
  });

  it('splits a sentence longer than a chunk at white space, and a word at the limit', () => {
    const chunks = chunkText(`${'word '.repeat(30)}${'x'.repeat(25)}`, 20);
    for (const chunk of chunks) expect(chunk.length).toBeLessThanOrEqual(20);
    expect(chunks.join(' ').replace(/\s+/g, ' ')).toBe(
      `${'word '.repeat(30)}${'x'.repeat(20)} ${'x'.repeat(5)}`,
    );
  });

  it('splits a long sentence at any white space: a word a line, tabs, no-break spaces', () => {
    for (const [separator, word] of [
      ['\n', 'apple'],
      ['\t', 'word2'],
      ['\u00a0', 'Öffnungszeiten'],
    ]) {
      const chunks = chunkText(`${word}${separator}`.repeat(300));
      expect(chunks.length).toBeGreaterThan(1);
      for (const chunk of chunks) {
        expect(chunk.length).toBeLessThanOrEqual(1_000);
        expect(new Set(chunk.split(/\s+/))).toEqual(new Set([word]));
      }
    }
  });

  it('never cuts a surrogate pair', () => {
    const chunks = chunkText('😀'.repeat(15), 9);
    for (const chunk of chunks) expect(chunk).not.toMatch(/^[\udc00-\udfff]|[\ud800-\udbff]$/);
    expect(chunks.join('')).toBe('😀'.repeat(15));
  });

  it('splits CJK sentences at their full stops', () => {
    expect(chunkText('営業時間は九時からです。日曜日は休みです。', 12)).toEqual([
      '営業時間は九時からです。',
      '日曜日は休みです。',
    ]);
  });

  it('answers nothing for blank text', () => {
    expect(chunkText(' \n\n \t')).toEqual([]);
  });

  it('chunks as the regular expressions did, whatever the text (fast-check)', () => {
    const pieces = [
      'a',
      'bc',
      'Hello',
      ' ',
      '  ',
      '\t',
      '\n',
      '\r',
      '\r\n',
      '\n\n',
      '\n \t\n',
      '\u3000',
      '\u00a0',
      '\u2028',
      '\u2029',
      '\v',
      '\f',
      '\u1680',
      '\u2000',
      '\u200a',
      '\u202f',
      '\u205f',
      '\ufeff',
      '\u200b',
      '.',
      '!',
      '?',
      '…',
      '。',
      '！',
      '？',
      '😀',
      '\ud800',
      'x'.repeat(12),
    ];
    fc.assert(
      fc.property(
        fc.array(fc.constantFrom(...pieces), { maxLength: 80 }).map((parts) => parts.join('')),
        fc.integer({ min: 2, max: 24 }),
        (text, max) => {
          expect(chunkText(text, max)).toEqual(chunkTextByExpressions(text, max));
        },
      ),
      { numRuns: 3000 },
    );
  });
});
