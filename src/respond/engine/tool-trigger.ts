import { MAX_JSON_DEPTH } from '../../common/validation/untrusted-json';

/** A tool call the local engine found in a message: `T({...})`. */
export interface TriggeredCall {
  name: string;
  arguments: Record<string, unknown>;
}

/**
 * Characters JSON has outside its strings besides brackets and quotes (the letters of true, false,
 * null and exponents among them): a scan stops at any other, such as the `(` of the next call.
 */
const JSON_OUTSIDE_STRINGS = /[\s0-9A-Za-z+.,:-]/;

/**
 * Characters the scans of one message may read in all, as a multiple of its length: past it no
 * further call is looked for. Each occurrence's scan stops at the end of its object, at depth
 * MAX_JSON_DEPTH or at a character no JSON has, so this is only reached by messages built to
 * make many scans long.
 */
const SCANNED_PER_CHARACTER = 4;

/**
 * The local engine's deterministic trigger (contract §26): the calls of the tools named `names`
 * that `message` writes as `T(` + a JSON object + `)`, in the order they appear. A name counts
 * only at a word's start (`my_lookup(` is not `lookup(`); the object is the shortest one that
 * parses and is followed by `)`.
 */
export function triggeredCalls(message: string, names: readonly string[]): TriggeredCall[] {
  const found: Array<TriggeredCall & { at: number }> = [];
  const budget = { left: SCANNED_PER_CHARACTER * message.length };
  for (const name of names) {
    const opener = `${name}(`;
    for (let at = message.indexOf(opener); at !== -1; at = message.indexOf(opener, at + 1)) {
      if (budget.left <= 0) break;
      if (at > 0 && /[A-Za-z0-9_-]/.test(message[at - 1])) continue;
      const args = objectAt(message, at + opener.length, budget);
      if (args) found.push({ name, arguments: args, at });
    }
  }
  return found
    .sort((a, b) => a.at - b.at)
    .map(({ name, arguments: args }) => ({ name, arguments: args }));
}

/** The JSON object starting at `start` (white space allowed before it) and closed by `)`. */
function objectAt(
  text: string,
  start: number,
  budget: { left: number },
): Record<string, unknown> | undefined {
  let open = start;
  while (open < text.length && /\s/.test(text[open])) open += 1;
  if (text[open] !== '{') return undefined;
  const close = matchingBrace(text, open, budget);
  if (close === undefined || !/^\s*\)/.test(text.slice(close + 1, close + 64))) return undefined;
  try {
    const value: unknown = JSON.parse(text.slice(open, close + 1));
    if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
      return value as Record<string, unknown>;
    }
  } catch {
    // Brackets that match are not yet JSON.
  }
  return undefined;
}

/**
 * Where the object opened at `open` closes: the one `}` at which it can, found by one reading of
 * brackets outside strings. Undefined at a bracket that does not match, deeper than a request
 * body may nest (serialised for the turn, such arguments overflowed the stack; exported, they
 * could not be imported back), at a character no JSON has outside strings, or once `budget` is
 * spent. Before, each of the next 64 `}` was tried and each candidate read whole: a message of
 * 8,000 characters built for it held the event loop 1.5 s.
 */
function matchingBrace(text: string, open: number, budget: { left: number }): number | undefined {
  const closers: string[] = [];
  let inString = false;
  for (let at = open; at < text.length; at += 1) {
    if (--budget.left < 0) return undefined;
    const char = text[at];
    if (inString) {
      if (char === '\\') at += 1;
      else if (char === '"') inString = false;
    } else if (char === '"') {
      inString = true;
    } else if (char === '{' || char === '[') {
      closers.push(char === '{' ? '}' : ']');
      if (closers.length > MAX_JSON_DEPTH) return undefined;
    } else if (char === '}' || char === ']') {
      if (closers.pop() !== char) return undefined;
      if (closers.length === 0) return at;
    } else if (!JSON_OUTSIDE_STRINGS.test(char)) {
      return undefined;
    }
  }
  return undefined;
}
