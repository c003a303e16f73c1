import { chunkText } from './chunker';

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
});
