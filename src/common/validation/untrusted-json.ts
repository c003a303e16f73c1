import type { FieldProblem } from '../errors/app-error';

/** Deepest nesting of objects and arrays a request body may have (API contract §14). */
export const MAX_JSON_DEPTH = 64;

/**
 * Deepest nesting of an import (a PMF v1 document, which the service's export writes): each value
 * it keeps (an end user's metadata, a tool's output or arguments) may nest MAX_JSON_DEPTH levels
 * of its own, and sits at most 5 levels down (document, memories, memory, tool_calls, call). At
 * MAX_JSON_DEPTH, the export of a value nesting 60 levels could not be imported back. Each value
 * is then held to its own bound (jsonDepth): the document's leaves room to spare.
 */
export const MAX_DOCUMENT_DEPTH = MAX_JSON_DEPTH + 8;

/** How deep a parsed JSON value nests: 0 for a scalar, 1 for `{}` or `[]`, 2 for `[[]]`. */
export function jsonDepth(value: unknown): number {
  if (value === null || typeof value !== 'object') return 0;
  let deepest = 0;
  for (const item of Array.isArray(value) ? value : Object.values(value)) {
    deepest = Math.max(deepest, jsonDepth(item));
  }
  return deepest + 1;
}

/**
 * Most keys one object of a request body may hold, and a bound on how wide its objects are in
 * all: class-transformer copies each object of a body before validation, at a cost of the square
 * of its keys (a 1 MiB body of 90,000 keys held the event loop 8 s: hostile review). Each object
 * counts the square of its keys toward MAX_KEY_SQUARES: four objects of 1,000 keys (their copy
 * 14 to 24 ms here), 400 of 100; any number of objects of a few keys (a tool's schema, a list's
 * items). The copy's cost per key, about 1.2 µs, remains: 160 ms for a 1 MiB body of one-key
 * objects, which the body limit bounds.
 */
export const MAX_OBJECT_KEYS = 1_000;
export const MAX_KEY_SQUARES = 4_000_000;

/**
 * Most objects and arrays a request body may hold, and most values in them (counted by the
 * commas between them): class-transformer copies every one before validation, unknown fields
 * and free-form ones (metadata, a tool's schema) included, at about 1.1 µs an object or array and
 * 0.3 µs a scalar here. A 1 MiB body of 330,000 empty objects took 0.4 s of the event loop, and a
 * 4 MiB knowledge body 2.2 s (hostile review, 2026-12-06); at these bounds 60 to 120 ms with the
 * parse, whatever the body's size. 32 tools of 16 KiB schemas, as dense as the tools spec's (an
 * object every 13 bytes: ajv's if/then conditions) hold about 35,000 objects, which bounds of
 * 25,000 and 100,000 refused.
 */
export const MAX_JSON_CONTAINERS = 50_000;
export const MAX_JSON_VALUES = 200_000;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const OPEN_BRACE = 0x7b;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACE = 0x7d;
const CLOSE_BRACKET = 0x5d;
const COMMA = 0x2c;

/** Which limit of jsonShapeExcess a JSON text passes first. */
export type JsonShapeExcess = 'depth' | 'object_keys' | 'key_squares' | 'containers' | 'values';

/**
 * Whether UTF-8 JSON text nests objects or arrays deeper than `depth`, holds an object of more
 * keys than `objectKeys`, objects whose key counts squared add up past `keySquares`, more objects
 * and arrays than `containers`, or more values in them than `values` (counted by the commas
 * between them, so one more per object or array at most): a single pass over the bytes, run
 * before JSON.parse, so that nothing (our walk, class-transformer, the database driver) ever
 * recurses over a body deeper than the limit or copies a wider or larger one. Brackets, colons
 * and commas inside strings do not count; outside them, a colon follows each key (a key written
 * twice counts twice).
 */
export function jsonShapeExcess(
  raw: Uint8Array,
  limits: {
    depth: number;
    objectKeys?: number;
    keySquares?: number;
    containers?: number;
    values?: number;
  },
): JsonShapeExcess | undefined {
  const {
    depth: maxDepth,
    objectKeys = Infinity,
    keySquares = Infinity,
    containers: maxContainers = Infinity,
    values: maxValues = Infinity,
  } = limits;
  const countsKeys = objectKeys !== Infinity || keySquares !== Infinity;
  // Keys so far of the object open at each depth; -1 for an array.
  const keysAt = countsKeys ? new Float64Array(maxDepth + 2) : undefined;
  let depth = 0;
  let squares = 0;
  let containers = 0;
  let separators = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i];
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > maxDepth) return 'depth';
      if (++containers > maxContainers) return 'containers';
      if (keysAt) keysAt[depth] = byte === OPEN_BRACE ? 0 : -1;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    } else if (byte === COMMA) {
      if (++separators + containers > maxValues) return 'values';
    } else if (byte === COLON && keysAt && depth > 0 && keysAt[depth] >= 0) {
      const keys = ++keysAt[depth];
      if (keys > objectKeys) return 'object_keys';
      // From k - 1 keys to k, the object's square grows by 2k - 1.
      squares += 2 * keys - 1;
      if (squares > keySquares) return 'key_squares';
    }
  }
  return undefined;
}

/** What a field problem says of a value past one of jsonShapeExcess's limits. */
export function shapeProblem(excess: JsonShapeExcess, maxDepth = MAX_JSON_DEPTH): string {
  switch (excess) {
    case 'depth':
      return `must not nest deeper than ${maxDepth} levels`;
    case 'object_keys':
      return `must not hold an object of more than ${MAX_OBJECT_KEYS} keys`;
    case 'key_squares':
      return `must not hold so many wide objects: each counts the square of its keys, ${MAX_KEY_SQUARES} in all`;
    case 'containers':
      return `must not hold more than ${MAX_JSON_CONTAINERS} objects and arrays`;
    case 'values':
      return `must not hold more than ${MAX_JSON_VALUES} values in its objects and arrays`;
  }
}

/** What values checked as one (the pieces of one document) have spent of the body's bounds. */
export interface WidthSpent {
  squares: number;
  containers: number;
  values: number;
}

/** Nothing spent yet: the budget of a new document. */
export const noWidthSpent = (): WidthSpent => ({ squares: 0, containers: 0, values: 0 });

/**
 * jsonShapeExcess's width and size limits on a value already parsed (a piece of an import, which
 * no body scan read): an object of more than MAX_OBJECT_KEYS keys, objects whose key counts
 * squared add up past MAX_KEY_SQUARES, more than MAX_JSON_CONTAINERS objects and arrays or
 * MAX_JSON_VALUES values in them, counted in `spent` across the values checked with it.
 * Recursion is bounded by the depth its reader allowed.
 */
export function widthExcess(
  value: unknown,
  spent: WidthSpent = noWidthSpent(),
): Exclude<JsonShapeExcess, 'depth'> | undefined {
  const walk = (node: unknown): Exclude<JsonShapeExcess, 'depth'> | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    const children = Array.isArray(node) ? node : Object.values(node);
    if (!Array.isArray(node)) {
      if (children.length > MAX_OBJECT_KEYS) return 'object_keys';
      spent.squares += children.length * children.length;
      if (spent.squares > MAX_KEY_SQUARES) return 'key_squares';
    }
    if (++spent.containers > MAX_JSON_CONTAINERS) return 'containers';
    spent.values += children.length;
    if (spent.values > MAX_JSON_VALUES) return 'values';
    for (const child of children) {
      const excess = walk(child);
      if (excess) return excess;
    }
    return undefined;
  };
  return walk(value);
}

/** True when the UTF-8 JSON text nests objects or arrays deeper than `max` (jsonShapeExcess). */
export function jsonNestsDeeperThan(raw: Uint8Array, max: number): boolean {
  return jsonShapeExcess(raw, { depth: max }) === 'depth';
}

/** A field name echoed in an error is cut here: a hostile key may be huge. */
export const MAX_FIELD_NAME = 200;

/**
 * Keys that reach Object.prototype, or a constructor's, when a body is merged or copied; and the
 * names of Object.prototype's other members (`toString`, `valueOf`, `hasOwnProperty`, …), which
 * class-transformer's copy of a body drops without a word: `{"toString": 1}` beside a DTO's
 * fields passed as no unknown field, and in an end user's metadata or a tool's schema the key was
 * lost (found by review). Refused at any depth, as the first three were.
 */
export const FORBIDDEN_KEYS: ReadonlySet<string> = new Set([
  ...Object.getOwnPropertyNames(Object.prototype),
  '__proto__',
  'prototype',
]);

// U+0000 (PostgreSQL cannot store it in text or jsonb) and unpaired UTF-16 surrogates (stored as
// U+FFFD, so two different strings would become one). With the u flag, a paired surrogate is one
// astral code point and does not match \p{Cs}.
// eslint-disable-next-line no-control-regex -- matching NUL is the point
const UNSTORABLE_TEXT = /[\u0000\p{Cs}]/u;

export function isStorableText(text: string): boolean {
  return !UNSTORABLE_TEXT.test(text);
}

/** Text from elsewhere (a model's reply) made storable: NUL dropped, lone surrogates U+FFFD. */
export function toStorableText(text: string): string {
  if (isStorableText(text)) return text;
  return text.replaceAll('\u0000', '').replace(/\p{Cs}/gu, '\ufffd');
}

/** Whether a parsed value's strings and keys are all storable (isStorableText), at any depth. */
export function isStorableJson(value: unknown): boolean {
  if (typeof value === 'string') return isStorableText(value);
  if (value === null || typeof value !== 'object') return true;
  if (Array.isArray(value)) return value.every(isStorableJson);
  return Object.entries(value).every(
    ([key, child]) => isStorableText(key) && isStorableJson(child),
  );
}

/**
 * The keys down to the first number in a parsed value that JSON cannot write (`1e999` parses as
 * Infinity, and is written back as null; `[]` for the value itself), or undefined: each caller
 * names the place as its errors do. Such a number is refused where a value is stored or compared
 * as its JSON text: kept, it would mean null there and something else here.
 */
export function nonFiniteNumberAt(value: unknown): string[] | undefined {
  if (typeof value === 'number') return Number.isFinite(value) ? undefined : [];
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, child] of Object.entries(value)) {
    const found = nonFiniteNumberAt(child);
    if (found) return [key, ...found];
  }
  return undefined;
}

/**
 * The first FORBIDDEN_KEYS key a parsed value holds, at any depth, or undefined: what a request
 * body may not hold, and so what a value from elsewhere (a model's arguments, a webhook's output)
 * may not be stored with, or its end user's export would be one that no import takes.
 */
export function forbiddenKeyIn(value: unknown): string | undefined {
  if (value === null || typeof value !== 'object') return undefined;
  for (const [key, child] of Array.isArray(value) ? value.entries() : Object.entries(value)) {
    if (typeof key === 'string' && FORBIDDEN_KEYS.has(key)) return key;
    const found = forbiddenKeyIn(child);
    if (found !== undefined) return found;
  }
  return undefined;
}

/** Whether a parsed value has, at any depth, a key of more than `max` characters. */
export function holdsKeyLongerThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Array.isArray(value)) return value.some((item) => holdsKeyLongerThan(item, max));
  return Object.entries(value).some(
    ([key, child]) => key.length > max || holdsKeyLongerThan(child, max),
  );
}

/**
 * Texts one of which every FORBIDDEN_KEYS key holds (`__` those of `__proto__`,
 * `__defineGetter__`, …): a body holding none of them holds no such key.
 */
const FORBIDDEN_KEY_MARKS = [
  '__',
  'constructor',
  'prototype',
  'Prototype',
  'toString',
  'toLocaleString',
  'valueOf',
  'hasOwnProperty',
  'propertyIsEnumerable',
];

/** Only text that spells a forbidden key, or hides one (or a NUL or surrogate) behind a \u escape. */
export function mayHoldUnsafeContent(raw: Buffer): boolean {
  return raw.includes('\\u') || FORBIDDEN_KEY_MARKS.some((mark) => raw.includes(mark));
}

/**
 * The first forbidden key or unstorable string in a parsed body, as a field problem, or null.
 * Recursion is bounded: bodies deeper than MAX_JSON_DEPTH were refused before parsing.
 */
export function findUnsafeContent(value: unknown): FieldProblem | null {
  const root = 'body';
  const walk = (node: unknown, path: string): FieldProblem | null => {
    if (typeof node === 'string') {
      return isStorableText(node)
        ? null
        : { field: path || root, problem: 'must not contain U+0000 or unpaired surrogates' };
    }
    if (node === null || typeof node !== 'object') return null;
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const problem = walk(node[i], `${path}.${i}`);
        if (problem) return problem;
      }
      return null;
    }
    for (const key of Object.keys(node)) {
      // Field names are echoed in the error body: a hostile key may be huge.
      const field = (path ? `${path}.${key}` : key).slice(0, MAX_FIELD_NAME);
      if (FORBIDDEN_KEYS.has(key)) return { field, problem: 'is not an allowed key' };
      if (!isStorableText(key)) {
        return {
          field: path || root,
          problem: 'keys must not contain U+0000 or unpaired surrogates',
        };
      }
      const problem = walk((node as Record<string, unknown>)[key], field);
      if (problem) return problem;
    }
    return null;
  };
  return walk(value, '');
}
