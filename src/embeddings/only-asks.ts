const QUESTION_MARKS = new Set(['?', '？', '؟']);
/** The longest question passed over, in characters and in words: a longer one may carry a fact. */
const LONGEST_QUESTION = 60;
const MOST_WORDS = 10;
/**
 * Anything that makes a text more than one bare clause: sentence ends (Latin, CJK, Arabic,
 * Urdu, Devanagari, Armenian, Ethiopic), clause marks, dashes, line breaks and pictographs
 * ("Got the job 🎉 can you believe it?" tells something).
 */
const MORE_THAN_A_CLAUSE =
  /[.!?。！？؟…۔।॥։።‼⁇⁈⁉,،，、;；:：—–\n\r\u2028\u2029]|\p{Extended_Pictographic}/u;

/**
 * Whether a memory's text only asks: one bare clause of at most LONGEST_QUESTION characters and
 * MOST_WORDS words, ending in question marks ("What kind of car do I drive?"). Such a text tells nothing to
 * recall, and its embedding sits nearest to every later question like it, above the statement
 * that answers it; so the worker does not embed it and it is found by its words alone
 * (docs/memory.md, "Recall by meaning"). Anything more (a comma, a second sentence, an emoji, a
 * longer text) may carry a fact ("I moved to Canada, did I tell you?"), and is embedded.
 * Linear in the text's length, whatever it holds.
 */
export function onlyAsks(text: string): boolean {
  const trimmed = text.trim();
  let end = trimmed.length;
  while (end > 0 && QUESTION_MARKS.has(trimmed[end - 1])) end -= 1;
  if (end === trimmed.length) return false;
  const clause = trimmed.slice(0, end).trim();
  return (
    clause.length > 0 &&
    clause.length <= LONGEST_QUESTION &&
    clause.split(/\s+/).length <= MOST_WORDS &&
    !MORE_THAN_A_CLAUSE.test(clause)
  );
}
