/** Sentences end at `.`, `!`, `?`, `…` or their CJK forms, then white space (or a CJK mark). */
export const SENTENCE_END = /(?<=[.!?…])\s+|(?<=[。！？])/u;

/** A memory is embedded in at most this many parts: its whole and up to seven sentences. */
export const MAX_MEMORY_PARTS = 8;

/** A sentence of fewer words is embedded with the next one (the last, with the one before). */
const MIN_PART_WORDS = 3;

// By word segments, not spaces: a Japanese or Chinese sentence has words and no spaces.
const words = new Intl.Segmenter(undefined, { granularity: 'word' });
const wordsIn = (text: string) => {
  let count = 0;
  for (const segment of words.segment(text)) if (segment.isWordLike) count += 1;
  return count;
};

/**
 * What of a memory is embedded (docs/memory.md, "Recall by meaning"): its whole text, and where
 * it has several sentences each of them too, so that a question about one sentence finds it
 * though the others pull the whole's vector elsewhere ("I have so much to do this month. My
 * brother is getting married in June."). Line breaks end sentences too; a sentence of fewer than
 * MIN_PART_WORDS words ("Hi!") goes with its neighbour; past MAX_MEMORY_PARTS, the last part
 * holds the rest. One sentence: the whole alone.
 */
export function memoryParts(text: string): string[] {
  const sentences: string[] = [];
  let pending = '';
  for (const piece of text.split(/\n+/u).flatMap((line) => line.split(SENTENCE_END))) {
    const sentence = piece.trim();
    if (!sentence) continue;
    pending = pending ? `${pending} ${sentence}` : sentence;
    if (wordsIn(pending) >= MIN_PART_WORDS) {
      sentences.push(pending);
      pending = '';
    }
  }
  if (pending) {
    if (sentences.length > 0) sentences.push(`${sentences.pop()} ${pending}`);
    else sentences.push(pending);
  }
  if (sentences.length < 2) return [text];
  const kept = sentences.slice(0, MAX_MEMORY_PARTS - 2);
  const rest = sentences.slice(MAX_MEMORY_PARTS - 2);
  if (rest.length > 0) kept.push(rest.join(' '));
  return [text, ...kept];
}
