/** A sentence's end: Latin, CJK full-width and Arabic marks. */
const SENTENCE_END = /[.!?。！？؟…]/u;
const QUESTION_MARKS = /[?？؟]+\s*$/u;

/**
 * Whether a memory's text only asks: one sentence, ending in a question mark ("What kind of car
 * do I drive?"). Such a text tells nothing to recall, and its embedding sits nearest to every
 * later question like it, above the statement that answers it; so it is not embedded and is
 * found by its words alone (docs/memory.md, "Recall by meaning"). Any other sentence end or a
 * line break before the mark makes it a text that tells something, and it is embedded.
 */
export function onlyAsks(text: string): boolean {
  const trimmed = text.trim();
  const mark = QUESTION_MARKS.exec(trimmed);
  if (!mark) return false;
  const before = trimmed.slice(0, mark.index);
  return before.length > 0 && !SENTENCE_END.test(before) && !before.includes('\n');
}
