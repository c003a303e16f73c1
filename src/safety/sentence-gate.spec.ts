import fc from 'fast-check';
import { SentenceGate, type SentenceVerdict } from './sentence-gate';

/** A gate whose checks the test answers one by one, recording what was checked and released. */
function harness(options: { maxSentenceLength?: number; contextLength?: number } = {}) {
  const checked: string[] = [];
  /** What each check read before its sentence. */
  const contexts: string[] = [];
  const released: string[] = [];
  const waiting: ((verdict: SentenceVerdict) => void)[] = [];
  const gate = new SentenceGate({
    check: (sentence, context) => {
      checked.push(sentence);
      contexts.push(context);
      return new Promise((resolve) => waiting.push(resolve));
    },
    release: (text) => void released.push(text),
    ...options,
  });
  /** Answers the oldest waiting check, once the gate has asked for it. */
  const answer = async (verdict: SentenceVerdict) => {
    while (waiting.length === 0) await new Promise((resolve) => setImmediate(resolve));
    waiting.shift()?.(verdict);
  };
  return { gate, checked, contexts, released, answer };
}

/** A gate that allows everything, to read where it cuts. */
async function sentencesOf(deltas: string[], maxSentenceLength?: number): Promise<string[]> {
  const released: string[] = [];
  const gate = new SentenceGate({
    check: async () => 'allow',
    release: (text) => void released.push(text),
    maxSentenceLength,
  });
  for (const delta of deltas) await gate.push(delta);
  await gate.end();
  return released;
}

describe('SentenceGate', () => {
  it('releases a sentence only after its check, holding back the one still being written', async () => {
    const { gate, checked, released, answer } = harness();
    const pushed = gate.push('Hello there. How are');
    await answer('allow');
    await expect(pushed).resolves.toBe('open');
    expect(checked).toEqual(['Hello there.']);
    expect(released).toEqual(['Hello there.']);

    const next = gate.push(' you? Fine');
    await answer('allow');
    await expect(next).resolves.toBe('open');
    expect(released).toEqual(['Hello there.', ' How are you?']);

    const ended = gate.end();
    await answer('allow');
    await answer('allow');
    await expect(ended).resolves.toBe('open');
    // The rest, then the whole reply once more.
    expect(checked).toEqual([
      'Hello there.',
      ' How are you?',
      ' Fine',
      'Hello there. How are you? Fine',
    ]);
    expect(released.join('')).toBe('Hello there. How are you? Fine');
  });

  it('releases nothing before the check answers', async () => {
    const { gate, released, answer } = harness();
    const pushed = gate.push('One. Two');
    await new Promise((resolve) => setImmediate(resolve));
    expect(released).toEqual([]);
    await answer('allow');
    await pushed;
    expect(released).toEqual(['One.']);
  });

  it('checks every sentence a single delta completes, in order', async () => {
    const { gate, checked, answer } = harness();
    const pushed = gate.push('A one. B two! C three? D');
    await answer('allow');
    await answer('allow');
    await answer('allow');
    await pushed;
    expect(checked).toEqual(['A one.', ' B two!', ' C three?']);
  });

  it('stops at a block: nothing after it is released or checked, and it says so', async () => {
    const { gate, checked, released, answer } = harness();
    const pushed = gate.push('Fine sentence. Bad sentence. Another one. ');
    await answer('allow');
    await answer('block');
    await expect(pushed).resolves.toBe('blocked');
    expect(released).toEqual(['Fine sentence.']);
    expect(gate.state).toBe('blocked');
    expect(gate.blockedSentence).toBe(' Bad sentence.');
    await expect(gate.push('More text. ')).resolves.toBe('blocked');
    await expect(gate.end()).resolves.toBe('blocked');
    expect(checked).toEqual(['Fine sentence.', ' Bad sentence.']);
    expect(released).toEqual(['Fine sentence.']);
  });

  it('checks the rest at the end, and may block it', async () => {
    const { gate, released, answer } = harness();
    await gate.push('no sentence end at all');
    const ended = gate.end();
    await answer('block');
    await expect(ended).resolves.toBe('blocked');
    expect(released).toEqual([]);
  });

  it('releases whitespace alone without a check', async () => {
    const { gate, checked, released, answer } = harness();
    const pushed = gate.push('Done.\n');
    await answer('allow');
    await pushed;
    await expect(gate.push('\n  ')).resolves.toBe('open');
    await expect(gate.end()).resolves.toBe('open');
    expect(checked).toEqual(['Done.']);
    expect(released).toEqual(['Done.', '\n', '\n', '  ']);
  });

  it('keeps the order when the caller does not await each push', async () => {
    const released: string[] = [];
    const gate = new SentenceGate({
      check: (sentence) =>
        new Promise((resolve) => setTimeout(() => resolve('allow'), sentence.length % 3)),
      release: (text) => void released.push(text),
    });
    const text = 'One. Two. Three. Four. Five. Six. Seven.';
    const pushes = [...text].map((char) => gate.push(char));
    await Promise.all(pushes);
    await gate.end();
    expect(released).toEqual(['One.', ' Two.', ' Three.', ' Four.', ' Five.', ' Six.', ' Seven.']);
  });

  it('fails with the check: the push rejects, and so does everything after', async () => {
    const failure = new Error('moderation down');
    const gate = new SentenceGate({
      check: () => Promise.reject(failure),
      release: () => undefined,
    });
    await expect(gate.push('A sentence. ')).rejects.toBe(failure);
    await expect(gate.push('More.')).rejects.toBe(failure);
    await expect(gate.end()).rejects.toBe(failure);
  });

  it('refuses a push after the end', async () => {
    const gate = new SentenceGate({ check: async () => 'allow', release: () => undefined });
    await gate.end();
    await expect(gate.push('late')).rejects.toThrow('push after end');
  });

  describe('finds sentence ends', () => {
    it.each([
      ['. ! ? …', ['One.', ' Two!', ' Three?', ' Four…', ' Five']],
      ['ellipsis and ?!', ['Wait...', ' Really?!', ' Yes']],
      ['closing quotes and brackets', ['She said "Stop."', ' (Then left.)', ' End']],
      ['newlines', ['Line one\n', 'Line two\n', '\n', 'Three']],
      ['CJK stops without spaces', ['今日は晴れ。', '散歩に行く！', 'いいね']],
    ])('%s', async (_what, expected) => {
      await expect(sentencesOf([expected.join('')])).resolves.toEqual(expected);
    });

    it.each([
      ['a decimal', 'It costs 3.5 euros. Done'],
      ['a version', 'Use v1.2.3 now. Done'],
      ['a domain', 'See example.com today. Done'],
      ['e.g. and i.e.', 'Fruit, e.g. apples, i.e. red ones. Done'],
      ['an initial', 'Ask J. Smith about it. Done'],
      ['titles', 'Dr. Who and Mrs. Jones met. Done'],
      ['German and Spanish abbreviations', 'Etwas, z.B. Brot, kauft Sr. Gómez. Done'],
    ])('without splitting %s', async (_what, text) => {
      const [first, second] = text.split(/(?<=\.) (?=Done$)/);
      await expect(sentencesOf([text])).resolves.toEqual([first, ` ${second}`]);
    });

    it('waits for the next delta before ending a sentence at the end of the text so far', async () => {
      const { gate, checked, answer } = harness();
      await gate.push('It costs 3.');
      expect(checked).toEqual([]);
      await gate.push('5 euros');
      expect(checked).toEqual([]);
      const pushed = gate.push('. Cheap');
      await answer('allow');
      await pushed;
      expect(checked).toEqual(['It costs 3.5 euros.']);
    });

    it('cuts a run without a sentence end at a space beyond the limit', async () => {
      const words = Array.from({ length: 40 }, (_, index) => `word${index}`).join(' ');
      const pieces = await sentencesOf([words], 50);
      expect(pieces.join('')).toBe(words);
      expect(pieces.length).toBeGreaterThan(4);
      for (const piece of pieces) expect(piece.length).toBeLessThanOrEqual(50);
      expect(pieces.slice(0, -1).every((piece) => piece.endsWith(' '))).toBe(true);
    });

    it('cuts a run without spaces at the limit', async () => {
      const pieces = await sentencesOf(['x'.repeat(120)], 50);
      expect(pieces).toEqual(['x'.repeat(50), 'x'.repeat(50), 'x'.repeat(20)]);
    });
  });

  it('releases exactly the input, however it is split into deltas', async () => {
    const piece = fc.constantFrom(
      'a',
      'b',
      ' ',
      '.',
      '!',
      '?',
      '…',
      '\n',
      '"',
      '3',
      'é',
      '。',
      'e.g.',
    );
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(piece, { maxLength: 8 }), { maxLength: 30 }),
        async (parts) => {
          const deltas = parts.map((part) => part.join(''));
          const whole = await sentencesOf([deltas.join('')], 40);
          const streamed = await sentencesOf(deltas, 40);
          expect(streamed.join('')).toBe(deltas.join(''));
          expect(whole.join('')).toBe(deltas.join(''));
        },
      ),
    );
  });

  it('holds back at most one sentence when each push is awaited', async () => {
    const released: string[] = [];
    const gate = new SentenceGate({
      check: async () => 'allow',
      release: (t) => void released.push(t),
    });
    const text = 'First one. Second one. Third one. Fourth';
    let sent = '';
    for (const char of text) {
      await gate.push(char);
      sent += char;
      // What is held back contains no complete sentence: at most the one being written.
      const held = sent.slice(released.join('').length);
      expect(held.replace(/^\s+/, '')).not.toMatch(/[.!?]\s/);
    }
  });

  it('scans a long stream of one-character deltas', async () => {
    const released: string[] = [];
    let checks = 0;
    const gate = new SentenceGate({
      check: async () => {
        checks++;
        return 'allow';
      },
      release: (text) => void released.push(text),
    });
    const text = 'This is a sentence of a long reply. '.repeat(500);
    for (const char of text) await gate.push(char);
    await gate.end();
    // 500 sentences, and the whole reply once more: it outgrew the context.
    expect(checks).toBe(501);
    expect(released.join('')).toBe(text);
  });

  describe('reads each sentence after the sentences released before it (contract §29)', () => {
    it('reads text released before the gate (a tool turn before its pause) as context, never releasing it again', async () => {
      const checks: Array<[string, string]> = [];
      const released: string[] = [];
      const gate = new SentenceGate({
        check: async (sentence, context) => {
          checks.push([context, sentence]);
          return /kill[\s\S]*knife/.test(context + sentence) ? 'block' : 'allow';
        },
        release: (text) => void released.push(text),
        releasedBefore: 'I will kill him.\n\n',
      });
      await gate.push('The knife is ready. ');
      expect(await gate.end()).toBe('blocked');
      expect(checks).toEqual([['I will kill him.\n\n', 'The knife is ready.']]);
      expect(released).toEqual([]);
    });

    it('checks the whole reply at its end when it began with text released before, never checked', async () => {
      const checked: Array<[string, string]> = [];
      const gate = new SentenceGate({
        // As ReplySafety's check: a sentence that adds nothing is allowed without reading the
        // context, which it takes for clean.
        check: async (sentence, context) => {
          checked.push([context, sentence]);
          return /knife/.test(sentence) ? 'block' : 'allow';
        },
        release: () => undefined,
        releasedBefore: 'I will kill him with a knife.\n\n',
      });
      await gate.push('Done.');
      expect(await gate.end()).toBe('blocked');
      expect(checked.at(-1)).toEqual(['', 'I will kill him with a knife.\n\nDone.']);
    });

    it('keeps the last sentences of a long text released before as context, not none', async () => {
      const contexts: string[] = [];
      const gate = new SentenceGate({
        check: async (sentence, context) => {
          contexts.push(context);
          return /kill[\s\S]*knife/.test(context + sentence) ? 'block' : 'allow';
        },
        release: () => undefined,
        releasedBefore: `${'Fine weather. '.repeat(150)}I will kill him.\n\n`,
      });
      await gate.push('Sure. The knife is ready. ');
      expect(await gate.end()).toBe('blocked');
      expect(contexts[0]).toMatch(/Fine weather\. I will kill him\.\n\n$/);
      expect(contexts[0].length).toBeLessThanOrEqual(2000);
    });

    it('gives each check the released sentences as context, whitespace included', async () => {
      const { gate, checked, contexts, answer } = harness();
      const pushed = gate.push('I will kill him.\nThe knife is ready. Go');
      await answer('allow');
      await answer('allow');
      await pushed;
      const ended = gate.end();
      await answer('allow');
      await answer('allow');
      await expect(ended).resolves.toBe('open');
      // The line break after the first sentence is released without a check, and read after it.
      expect(checked).toEqual([
        'I will kill him.',
        'The knife is ready.',
        ' Go',
        'I will kill him.\nThe knife is ready. Go',
      ]);
      expect(contexts).toEqual([
        '',
        'I will kill him.\n',
        'I will kill him.\nThe knife is ready.',
        '',
      ]);
    });

    it('blocks the sentence that makes the reply harmful with the ones before it', async () => {
      const released: string[] = [];
      const gate = new SentenceGate({
        check: async (sentence, context) =>
          /kill/.test(context + sentence) && /knife/.test(context + sentence) ? 'block' : 'allow',
        release: (text) => void released.push(text),
      });
      await expect(gate.push('I will kill him. The knife is ready. ')).resolves.toBe('blocked');
      expect(released).toEqual(['I will kill him.']);
      expect(gate.blockedSentence).toBe(' The knife is ready.');
    });

    it('keeps the context to whole sentences of at most contextLength characters', async () => {
      const { gate, contexts, answer } = harness({ contextLength: 20 });
      const pushed = gate.push('Aaaa one. Bbbb two. Cccc three. Dddd four. E');
      for (let sentence = 0; sentence < 4; sentence++) await answer('allow');
      await pushed;
      expect(contexts).toEqual(['', 'Aaaa one.', 'Aaaa one. Bbbb two.', ' Cccc three.']);
    });

    it('checks a reply that outgrew its context whole at the end, and blocks on it', async () => {
      const { gate, checked, contexts, released, answer } = harness({ contextLength: 20 });
      const pushed = gate.push('Aaaa one. Bbbb two. Cccc three. Dddd four. ');
      for (let sentence = 0; sentence < 4; sentence++) await answer('allow');
      await pushed;
      const ended = gate.end();
      await answer('block');
      await expect(ended).resolves.toBe('blocked');
      // The last sentence was read after " Cccc three." only.
      expect(contexts.slice(-2)).toEqual([' Cccc three.', '']);
      expect(checked.at(-1)).toBe('Aaaa one. Bbbb two. Cccc three. Dddd four. ');
      // Everything was released: the caller follows it with the refusal.
      expect(released.join('')).toBe('Aaaa one. Bbbb two. Cccc three. Dddd four. ');
    });

    it('checks a reply of one sentence once, one of more once more whole at the end', async () => {
      const one = harness();
      const pushed = one.gate.push('Only this one.\n');
      await one.answer('allow');
      await pushed;
      await expect(one.gate.push('\n')).resolves.toBe('open');
      await expect(one.gate.end()).resolves.toBe('open');
      expect(one.checked).toEqual(['Only this one.']);

      const two = harness();
      const both = two.gate.push('One. Two.\n');
      await two.answer('allow');
      await two.answer('allow');
      await both;
      const ended = two.gate.end();
      await two.answer('allow');
      await expect(ended).resolves.toBe('open');
      expect(two.checked).toEqual(['One.', ' Two.', 'One. Two.\n']);
    });
  });
});
