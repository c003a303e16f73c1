/** The characters of a memory a reply quotes at most (the local engine's recall sentence). */
const QUOTE_MAX = 80;

/**
 * A memory as a reply quotes it: its white space folded, shortened to QUOTE_MAX characters with
 * an ellipsis: what the local engine's recall sentence puts in place of `{memory}`.
 */
export function quoteOf(content: string): string {
  return shortened(folded(content));
}

const folded = (content: string) => content.replace(/\s+/g, ' ').trim();

const shortened = (text: string) =>
  text.length <= QUOTE_MAX ? text : `${text.slice(0, QUOTE_MAX - 1).trimEnd()}…`;

/**
 * The shortest message whose quotation is looked for: a shorter one (`"ok"`, `"London"`) is as
 * likely to be in a reply for another reason (a tool's JSON, an instruction) as quoted from it.
 */
const QUOTATION_MIN_CHARACTERS = 12;

/**
 * What a stored reply that repeats the message `content` holds: its quote (quoteOf) or the whole
 * message, white space folded; none for a message shorter than QUOTATION_MIN_CHARACTERS or
 * without a letter or digit. Looked for without quotation marks around it: a personality's
 * `replies.recall` puts `{memory}` in whatever marks its business chose, or none (found by
 * review: `You told me {memory} earlier.` kept the forgotten message in the reply). Forgetting
 * the message forgets those replies too (MemoriesRepository.deleteForEndUser).
 */
export function quotationsOf(content: string): string[] {
  const text = folded(content);
  if ([...text].length < QUOTATION_MIN_CHARACTERS || !/[\p{L}\p{N}]/u.test(text)) return [];
  const quoted = shortened(text);
  return quoted === text ? [text] : [quoted, text];
}
