/** A chunk holds at most this many characters (UTF-16 code units): a few paragraphs of prose. */
export const MAX_CHUNK_CHARS = 1_000;

/** Paragraphs: text between blank lines. */
const PARAGRAPH_BREAK = /\n[ \t\f\v\r]*\n/;

/** Sentences end at `.`, `!`, `?`, `…` or their CJK forms, then white space (or a CJK mark). */
const SENTENCE_END = /(?<=[.!?…])\s+|(?<=[。！？])/u;

/**
 * Splits `piece` (longer than `max`) at the last white space within `max`, else hard at `max`
 * (a word longer than a chunk), never inside a surrogate pair.
 */
function splitWords(piece: string, max: number): string[] {
  const parts: string[] = [];
  let rest = piece;
  while (rest.length > max) {
    const space = rest.lastIndexOf(' ', max);
    let cut = space > 0 ? space : max;
    const code = rest.charCodeAt(cut - 1);
    if (space <= 0 && code >= 0xd800 && code <= 0xdbff) cut -= 1;
    parts.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) parts.push(rest);
  return parts;
}

/** A paragraph as pieces of at most `max`: its sentences, a sentence too long by its words. */
function piecesOf(paragraph: string, max: number): string[] {
  if (paragraph.length <= max) return [paragraph];
  return paragraph
    .split(SENTENCE_END)
    .map((sentence) => sentence.trim())
    .filter((sentence) => sentence.length > 0)
    .flatMap((sentence) => splitWords(sentence, max));
}

/**
 * The chunks of a document (docs/knowledge.md#chunking): consecutive paragraphs are put together
 * while the chunk stays within `max` characters; a paragraph longer than that is split into its
 * sentences, put together the same way (a sentence longer still, at white space). So a chunk
 * never ends inside a sentence unless the sentence alone is over `max`. Paragraphs inside a chunk
 * stay separated by a blank line; white space within a line is kept.
 */
export function chunkText(text: string, max = MAX_CHUNK_CHARS): string[] {
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
  for (const paragraph of text.replace(/\r\n?/g, '\n').split(PARAGRAPH_BREAK)) {
    const trimmed = paragraph.trim();
    if (!trimmed) continue;
    const pieces = piecesOf(trimmed, max);
    pieces.forEach((piece, index) => add(piece, index === 0 ? separator : ' '));
    separator = '\n\n';
  }
  if (current) chunks.push(current);
  return chunks;
}
