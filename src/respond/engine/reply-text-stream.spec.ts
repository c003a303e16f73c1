import { ReplyTextStream } from './reply-text-stream';

/** Feeds `answer` in pieces of `size` characters; answers the deltas. */
function feed(answer: string, size: number): { deltas: string[]; stream: ReplyTextStream } {
  const stream = new ReplyTextStream();
  const deltas: string[] = [];
  for (let i = 0; i < answer.length; i += size) {
    const delta = stream.push(answer.slice(i, i + size));
    if (delta) deltas.push(delta);
  }
  return { deltas, stream };
}

describe('ReplyTextStream', () => {
  const text = 'Congratulations! "Quoted", a\\backslash, a line\nbreak, tab\t and 😀 é.';
  const answer = JSON.stringify({ emotion: 'joy', text, intensity: 0.7 });

  it.each([1, 2, 3, 7, 1000])('decodes the text field fed %i characters at a time', (size) => {
    const { deltas, stream } = feed(answer, size);
    expect(deltas.join('')).toBe(text);
    expect(stream.text).toBe(text);
    expect(stream.isPlain).toBe(false);
  });

  it('decodes \\u escapes, surrogate pairs split across pieces included', () => {
    const escaped = '{"text":"caf\\u00e9 \\ud83d\\ude00!","emotion":"joy","intensity":1}';
    for (const size of [1, 5, 100]) expect(feed(escaped, size).stream.text).toBe('café 😀!');
  });

  it('ignores a "text" key nested deeper or inside another string', () => {
    const tricky = JSON.stringify({
      meta: { text: 'no' },
      emotion: 'the "text": "no"',
      text: 'yes',
    });
    expect(feed(tricky, 3).stream.text).toBe('yes');
  });

  it('passes plain text through when the provider ignored the format', () => {
    const { deltas, stream } = feed('  Hello there, friend.', 4);
    expect(stream.isPlain).toBe(true);
    expect(deltas.join('')).toBe('Hello there, friend.');
  });

  it('holds the first half of a surrogate pair split between two pieces of plain text (review)', () => {
    const stream = new ReplyTextStream();
    const deltas = ['I am going to ', '\ud83d', '\udd2a him.'].map((piece) => stream.push(piece));
    expect(deltas).toEqual(['I am going to ', '', '🔪 him.']);
    expect(stream.text).toBe('I am going to 🔪 him.');
  });

  it('keeps what arrived of a text cut off mid-answer', () => {
    expect(feed('{"text":"Half a rep', 4).stream.text).toBe('Half a rep');
  });
});
