import type { Token } from './text-normalizer';

type Atom =
  | { kind: 'word'; text: string }
  | { kind: 'prefix'; text: string }
  | { kind: 'number'; min: number; max: number }
  | { kind: 'gap'; max: number };

/** A parsed phrase: atoms, and arrays of alternative sequences. */
type Sequence = (Atom | Sequence[])[];

class TrieNode<T> {
  readonly words = new Map<string, TrieNode<T>>();
  readonly prefixes: { text: string; node: TrieNode<T> }[] = [];
  readonly numbers: { min: number; max: number; node: TrieNode<T> }[] = [];
  readonly gaps: { max: number; node: TrieNode<T> }[] = [];
  readonly values: T[] = [];
  /** The most tokens a match can span on reaching this node (gaps at their longest). */
  constructor(readonly depth = 0) {}
}

export interface PhraseMatch<T> {
  readonly value: T;
  /** Index of the first token matched, and of the one after the last. */
  readonly start: number;
  readonly end: number;
}

const MAX_NODES_PER_PHRASE = 50_000;
const MAX_GAP = 4;

/**
 * Phrases compiled into a trie over tokens. A phrase is written in plain words, with:
 * - `[a|b c|]` one of several alternatives (an empty one makes the group optional), nestable;
 * - `word*` any token starting with `word`;
 * - `~N` up to N tokens of anything (N ≤ 4) except a token that `isGapStop` refuses (negations);
 * - `#A-B` a number from A to B;
 * - `@NAME` the alternatives of a named set.
 * Literal words go through the text normaliser, so "j'ai", "don't" and "wanna" are written as a
 * person types them.
 *
 * Matching starts at every token and walks the trie; a phrase never crosses a clause or sentence
 * break nor the edge of a quotation. Work per start is bounded by the trie's depth and gap sizes,
 * so a whole text costs time linear in its length.
 */
export class PhraseTrie<T> {
  private readonly root = new TrieNode<T>();
  private nodeCount = 0;
  /** Named sets repeat literals across phrases: each is normalised once. */
  private readonly wordsOf = new Map<string, string[]>();
  private longest = 0;
  /** Every literal word of every phrase, in matching form. */
  readonly vocabulary = new Set<string>();
  /** The words of the vocabulary that phrases take as prefixes (`suicid*`). */
  readonly prefixes = new Set<string>();

  constructor(
    private readonly toWords: (literal: string) => string[],
    private readonly isGapStop: (token: Token) => boolean,
    private readonly sets: Readonly<Record<string, string>> = {},
  ) {}

  add(phrase: string, value: T): void {
    const source = this.substituteSets(phrase);
    if (/^\s*~|~\d\s*$/.test(source))
      throw new Error(`phrase must start and end with a word: ${phrase}`);
    const before = this.nodeCount;
    const ends = this.insert(
      new Set([this.root]),
      parse(source, phrase, (literal) => this.literal(literal, phrase)),
    );
    if (this.nodeCount - before > MAX_NODES_PER_PHRASE)
      throw new Error(`phrase expands too far: ${phrase}`);
    for (const node of ends) {
      if (node === this.root) throw new Error(`phrase can match nothing: ${phrase}`);
      if (!node.values.includes(value)) node.values.push(value);
      this.longest = Math.max(this.longest, node.depth);
    }
  }

  /** The most tokens any match can span. */
  get longestMatch(): number {
    return this.longest;
  }

  /** Every match, ordered by start. */
  matchAll(tokens: readonly Token[]): PhraseMatch<T>[] {
    const matches: PhraseMatch<T>[] = [];
    for (let start = 0; start < tokens.length; start++) {
      this.walk(this.root, tokens, start, start, matches);
    }
    return matches;
  }

  private walk(
    node: TrieNode<T>,
    tokens: readonly Token[],
    start: number,
    at: number,
    matches: PhraseMatch<T>[],
  ): void {
    for (const value of node.values) matches.push({ value, start, end: at });
    if (!this.continues(tokens, start, at)) return;
    const token = tokens[at];
    const next = node.words.get(token.text);
    if (next) this.walk(next, tokens, start, at + 1, matches);
    for (const prefix of node.prefixes) {
      if (token.text.startsWith(prefix.text))
        this.walk(prefix.node, tokens, start, at + 1, matches);
    }
    if (token.isNumber) {
      const value = Number(token.text);
      for (const range of node.numbers) {
        if (value >= range.min && value <= range.max) {
          this.walk(range.node, tokens, start, at + 1, matches);
        }
      }
    }
    for (const gap of node.gaps) {
      for (let skipped = 0; skipped <= gap.max; skipped++) {
        const after = at + skipped;
        if (skipped > 0 && this.isGapStop(tokens[after - 1])) break;
        if (!this.continues(tokens, start, after)) break;
        this.walk(gap.node, tokens, start, after, matches);
      }
    }
  }

  /** Whether the phrase begun at `start` may take the token at `at`. */
  private continues(tokens: readonly Token[], start: number, at: number): boolean {
    if (at >= tokens.length) return false;
    if (at === start) return true;
    return tokens[at].breakBefore === 0 && tokens[at].quote === tokens[start].quote;
  }

  private child(node: TrieNode<T>, atom: Atom): TrieNode<T> {
    switch (atom.kind) {
      case 'word': {
        let next = node.words.get(atom.text);
        if (!next) node.words.set(atom.text, (next = this.newNode(node.depth + 1)));
        return next;
      }
      case 'prefix': {
        let entry = node.prefixes.find((prefix) => prefix.text === atom.text);
        if (!entry) {
          node.prefixes.push((entry = { text: atom.text, node: this.newNode(node.depth + 1) }));
        }
        return entry.node;
      }
      case 'number': {
        let entry = node.numbers.find((range) => range.min === atom.min && range.max === atom.max);
        if (!entry) node.numbers.push((entry = { ...atom, node: this.newNode(node.depth + 1) }));
        return entry.node;
      }
      case 'gap': {
        let entry = node.gaps.find((gap) => gap.max === atom.max);
        if (!entry)
          node.gaps.push((entry = { max: atom.max, node: this.newNode(node.depth + atom.max) }));
        return entry.node;
      }
    }
  }

  private newNode(depth: number): TrieNode<T> {
    this.nodeCount++;
    return new TrieNode<T>(depth);
  }

  /** Adds the sequence after each of `from`; returns the nodes where it ends. */
  private insert(from: Set<TrieNode<T>>, sequence: Sequence): Set<TrieNode<T>> {
    let nodes = from;
    for (const item of sequence) {
      if (Array.isArray(item)) {
        const ends = new Set<TrieNode<T>>();
        for (const option of item) for (const node of this.insert(nodes, option)) ends.add(node);
        nodes = ends;
      } else {
        nodes = new Set([...nodes].map((node) => this.child(node, item)));
      }
    }
    return nodes;
  }

  private literal(literal: string, phrase: string): Atom[] {
    const gap = /^~(\d)$/.exec(literal);
    if (gap) {
      const max = Number(gap[1]);
      if (max < 1 || max > MAX_GAP) throw new Error(`gap out of range in phrase: ${phrase}`);
      return [{ kind: 'gap', max }];
    }
    const range = /^#(\d+)-(\d+)$/.exec(literal);
    if (range) return [{ kind: 'number', min: Number(range[1]), max: Number(range[2]) }];
    const isPrefix = literal.endsWith('*');
    const written = isPrefix ? literal.slice(0, -1) : literal;
    let words = this.wordsOf.get(written);
    if (words === undefined) this.wordsOf.set(written, (words = this.toWords(written)));
    if (words.length === 0) throw new Error(`"${literal}" has no words in phrase: ${phrase}`);
    for (const word of words) this.vocabulary.add(word);
    const atoms: Atom[] = words.map((text) => ({ kind: 'word', text }));
    if (isPrefix) {
      atoms[atoms.length - 1] = { kind: 'prefix', text: words[words.length - 1] };
      this.prefixes.add(words[words.length - 1]);
    }
    return atoms;
  }

  private substituteSets(phrase: string): string {
    let source = phrase;
    for (let depth = 0; source.includes('@'); depth++) {
      if (depth > 8) throw new Error(`named sets nest too deep in phrase: ${phrase}`);
      source = source.replace(/@([A-Z_]+)/g, (_, name: string) => {
        const set = this.sets[name];
        if (set === undefined) throw new Error(`unknown set @${name} in phrase: ${phrase}`);
        return `[${set}]`;
      });
    }
    return source;
  }
}

/** Parses the phrase syntax; `literal` turns one written word (or `~N`, `#A-B`) into atoms. */
function parse(source: string, phrase: string, literal: (text: string) => Atom[]): Sequence {
  let position = 0;
  const sequence = (): Sequence => {
    const items: Sequence = [];
    for (;;) {
      while (source[position] === ' ') position++;
      const char = source[position];
      if (char === undefined || char === '|' || char === ']') return items;
      if (char === '[') {
        position++;
        const options: Sequence[] = [];
        for (;;) {
          options.push(sequence());
          const closing = source[position++];
          if (closing === ']') break;
          if (closing !== '|') throw new Error(`unclosed [ in phrase: ${phrase}`);
        }
        items.push(options);
      } else {
        const end = source.slice(position).search(/[ [\]|]/);
        const text = end === -1 ? source.slice(position) : source.slice(position, position + end);
        position += text.length;
        items.push(...literal(text));
      }
    }
  };
  const all = sequence();
  if (position !== source.length) throw new Error(`unbalanced ] in phrase: ${phrase}`);
  return all;
}
