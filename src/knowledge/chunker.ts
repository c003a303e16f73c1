/** A chunk holds at most this many characters (UTF-16 code units): a few paragraphs of prose. */
export const MAX_CHUNK_CHARS = 1_000;

/** Where a sentence may end: `.`, `!`, `?`, `…` (before white space) and the CJK `。`, `！`, `？`. */
const SENTENCE_MARK = /[.!?…。！？]/g;

/** The CJK full stop, exclamation and question marks: the next sentence may start at once. */
function isCjkEnd(code: number): boolean {
  return code === 0x3002 || code === 0xff01 || code === 0xff1f;
}

/** White space as `\s` and String#trim have it (one UTF-16 unit each). */
function isSpace(code: number): boolean {
  return (
    (code >= 0x09 && code <= 0x0d) ||
    code === 0x20 ||
    code === 0xa0 ||
    code === 0x1680 ||
    (code >= 0x2000 && code <= 0x200a) ||
    code === 0x2028 ||
    code === 0x2029 ||
    code === 0x202f ||
    code === 0x205f ||
    code === 0x3000 ||
    code === 0xfeff
  );
}

/** Space or tab within a line: what may stand between the two line breaks of a paragraph break. */
function isBlankInLine(code: number): boolean {
  return code === 0x20 || code === 0x09 || code === 0x0b || code === 0x0c || code === 0x0d;
}

/**
 * Calls `each` with the paragraphs of `text` (text between two line breaks with only blanks
 * between them). This file reads the text by positions, with no regular expression split or
 * array per sentence: those took the event loop for 0.2 to 0.5 s on 1 MiB of tiny paragraphs
 * or sentences (found by review), about three times what this takes.
 */
function forEachParagraph(text: string, each: (paragraph: string) => void): void {
  let start = 0;
  let at = text.indexOf('\n');
  while (at !== -1) {
    let next = at + 1;
    while (next < text.length && isBlankInLine(text.charCodeAt(next))) next += 1;
    if (next < text.length && text.charCodeAt(next) === 0x0a) {
      each(text.slice(start, at));
      start = next + 1;
      at = text.indexOf('\n', start);
    } else {
      at = text.indexOf('\n', at + 1);
    }
  }
  each(text.slice(start));
}

/**
 * Calls `each` with the sentences of `paragraph`, trimmed, blank ones left out: a sentence ends
 * at `.`, `!`, `?` or `…` followed by white space (which goes), or at `。`, `！` or `？`.
 */
function forEachSentence(paragraph: string, each: (sentence: string) => void): void {
  const emit = (from: number, to: number) => {
    const sentence = paragraph.slice(from, to).trim();
    if (sentence) each(sentence);
  };
  const marks = new RegExp(SENTENCE_MARK);
  let start = 0;
  for (let mark = marks.exec(paragraph); mark !== null; mark = marks.exec(paragraph)) {
    const after = mark.index + 1;
    if (after >= paragraph.length) break;
    if (isCjkEnd(paragraph.charCodeAt(mark.index))) {
      if (after > start) {
        emit(start, after);
        start = after;
      }
    } else if (isSpace(paragraph.charCodeAt(after))) {
      let end = after + 1;
      while (end < paragraph.length && isSpace(paragraph.charCodeAt(end))) end += 1;
      emit(start, after);
      start = end;
      marks.lastIndex = end;
    }
  }
  emit(start, paragraph.length);
}

/**
 * Splits `piece` (trimmed, longer than `max`) at the last white space within `max`, else hard at
 * `max` (a word longer than a chunk), never inside a surrogate pair. By positions: cutting and
 * trimming what was left copied it, every `max` characters (0.15 s for 1 MiB without a space).
 */
function splitWords(piece: string, max: number): string[] {
  const parts: string[] = [];
  let start = 0;
  while (piece.length - start > max) {
    // Looked for within the next `max` only: lastIndexOf would scan back to the start each time.
    let space = start + max;
    // Any white space: a list of one word a line, tab-separated values or words joined by
    // no-break spaces were cut inside a word at an ASCII space's absence (found by review).
    while (space > start && !isSpace(piece.charCodeAt(space))) space -= 1;
    let cut = space > start ? space : start + max;
    const code = piece.charCodeAt(cut - 1);
    if (space <= start && code >= 0xd800 && code <= 0xdbff) cut -= 1;
    parts.push(piece.slice(start, cut).trim());
    start = cut;
    while (start < piece.length && isSpace(piece.charCodeAt(start))) start += 1;
  }
  if (start < piece.length) parts.push(piece.slice(start));
  return parts;
}

/** A paragraph as pieces of at most `max`: its sentences, a sentence too long by its words. */
function forEachPiece(paragraph: string, max: number, each: (piece: string) => void): void {
  if (paragraph.length <= max) return each(paragraph);
  forEachSentence(paragraph, (sentence) => {
    if (sentence.length <= max) each(sentence);
    else for (const part of splitWords(sentence, max)) each(part);
  });
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
  // Line breaks as \n. Split and joined: a regular expression's replace (and replaceAll) took
  // 0.15 s on 1 MiB of `a\r`, most of it collecting garbage; this takes 0.02 s.
  const lines = text.includes('\r') ? text.split('\r\n').join('\n').split('\r').join('\n') : text;
  forEachParagraph(lines, (paragraph) => {
    const trimmed = paragraph.trim();
    if (!trimmed) return;
    let joiner = separator;
    forEachPiece(trimmed, max, (piece) => {
      add(piece, joiner);
      joiner = ' ';
    });
    separator = '\n\n';
  });
  if (current) chunks.push(current);
  return chunks;
}
