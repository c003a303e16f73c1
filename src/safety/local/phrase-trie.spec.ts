import { PhraseTrie } from './phrase-trie';
import { TextNormalizer } from './text-normalizer';

describe('PhraseTrie', () => {
  const normalizer = new TextNormalizer();
  const build = (phrases: string[], sets: Record<string, string> = {}) => {
    const trie = new PhraseTrie<string>(
      (literal) => normalizer.words(literal),
      (token) => token.text === 'not',
      sets,
    );
    for (const phrase of phrases) trie.add(phrase, phrase);
    return trie;
  };
  const spans = (trie: PhraseTrie<string>, text: string) =>
    trie
      .matchAll(normalizer.normalize(text).tokens)
      .map((match) => `${match.value}@${match.start}-${match.end}`);

  it('matches alternatives, optional parts and nested groups', () => {
    const trie = build(['[want|wanted] to [just|] [die|be [dead|gone]]']);
    expect(spans(trie, 'i want to die')).toHaveLength(1);
    expect(spans(trie, 'i wanted to just be gone')).toHaveLength(1);
    expect(spans(trie, 'i want to be here')).toEqual([]);
  });

  it('writes literals as people type them', () => {
    const trie = build(["i don't wanna", "j'ai envie"]);
    expect(spans(trie, 'I dont want to go')).toEqual(["i don't wanna@0-4"]);
    expect(spans(trie, 'j ai envie')).toEqual(["j'ai envie@0-3"]);
  });

  it('matches prefixes and number ranges', () => {
    const trie = build(['suicid*', '#1-17 years old']);
    expect(spans(trie, 'suicidal thoughts, 14 years old, 18 years old')).toEqual([
      'suicid*@0-1',
      '#1-17 years old@2-5',
    ]);
  });

  it('bridges a gap of up to N words, but not a refused one', () => {
    const trie = build(['want ~2 die']);
    expect(spans(trie, 'want to die')).toEqual(['want ~2 die@0-3']);
    expect(spans(trie, 'want to just die')).toEqual(['want ~2 die@0-4']);
    expect(spans(trie, 'want to really just die')).toEqual([]);
    expect(spans(trie, 'want not die')).toEqual([]);
  });

  it('never crosses a clause or sentence break, nor the edge of a quotation', () => {
    const trie = build(['want to die', 'want ~2 die']);
    expect(spans(trie, 'i want, to die')).toEqual([]);
    expect(spans(trie, 'i want. to die')).toEqual([]);
    expect(spans(trie, 'i want "to die"')).toEqual([]);
  });

  it('substitutes named sets, nested', () => {
    const trie = build(['[@VERB] @TARGET'], {
      VERB: 'stab|shoot',
      TARGET: 'him|my @PERSON',
      PERSON: 'boss',
    });
    expect(spans(trie, 'shoot my boss')).toEqual(['[@VERB] @TARGET@0-3']);
  });

  it('knows the most tokens a match can span, gaps at their longest', () => {
    expect(build(['want to die']).longestMatch).toBe(3);
    expect(build(['want ~3 [die|be dead]', 'kill myself']).longestMatch).toBe(6);
  });

  it('collects the words of its phrases', () => {
    const trie = build(['kill myself', 'suicid*']);
    expect([...trie.vocabulary].sort()).toEqual(['kil', 'myself', 'suicid']);
  });

  it.each([
    ['an unclosed group', '[want|wish to die'],
    ['a stray bracket', 'want] to die'],
    ['a leading gap', '~2 die'],
    ['a trailing gap', 'die ~2'],
    ['a gap too long', 'want ~5 die'],
    ['an unknown set', '@NOPE die'],
    ['a literal with no word', 'want 😭 die'],
  ])('refuses %s', (_what, phrase) => {
    expect(() => build([phrase])).toThrow();
  });
});
