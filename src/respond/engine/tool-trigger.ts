import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from '../../common/validation/untrusted-json';

/** A tool call the local engine found in a message: `T({...})`. */
export interface TriggeredCall {
  name: string;
  arguments: Record<string, unknown>;
}

/** `}` positions tried per occurrence: bounds the work of a message full of braces. */
const MAX_CLOSINGS_TRIED = 64;

/**
 * The local engine's deterministic trigger (contract §26): the calls of the tools named `names`
 * that `message` writes as `T(` + a JSON object + `)`, in the order they appear. A name counts
 * only at a word's start (`my_lookup(` is not `lookup(`); the object is the shortest one that
 * parses and is followed by `)`.
 */
export function triggeredCalls(message: string, names: readonly string[]): TriggeredCall[] {
  const found: Array<TriggeredCall & { at: number }> = [];
  for (const name of names) {
    const opener = `${name}(`;
    for (let at = message.indexOf(opener); at !== -1; at = message.indexOf(opener, at + 1)) {
      if (at > 0 && /[A-Za-z0-9_-]/.test(message[at - 1])) continue;
      const args = objectAt(message, at + opener.length);
      if (args) found.push({ name, arguments: args, at });
    }
  }
  return found
    .sort((a, b) => a.at - b.at)
    .map(({ name, arguments: args }) => ({ name, arguments: args }));
}

/** The JSON object starting at `start` (white space allowed before it) and closed by `)`. */
function objectAt(text: string, start: number): Record<string, unknown> | undefined {
  let open = start;
  while (open < text.length && /\s/.test(text[open])) open += 1;
  if (text[open] !== '{') return undefined;
  let tried = 0;
  for (let close = text.indexOf('}', open); close !== -1; close = text.indexOf('}', close + 1)) {
    if (++tried > MAX_CLOSINGS_TRIED) return undefined;
    if (!/^\s*\)/.test(text.slice(close + 1, close + 64))) continue;
    const candidate = text.slice(open, close + 1);
    // Deeper than a request body may nest: not a call (serialised for the turn, it overflowed
    // the stack; exported, it could not be imported back).
    if (jsonNestsDeeperThan(Buffer.from(candidate), MAX_JSON_DEPTH)) return undefined;
    try {
      const value: unknown = JSON.parse(candidate);
      if (value !== null && typeof value === 'object' && !Array.isArray(value)) {
        return value as Record<string, unknown>;
      }
    } catch {
      // Not this `}`: the object may close later.
    }
  }
  return undefined;
}
