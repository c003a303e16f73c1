interface Node {
  readonly next: Map<string, Node>;
  /** The vocabulary word that ends here, if one does. */
  word?: string;
  /** The lexicon takes this word as a prefix (`suicid*`): any ending reads as it. */
  prefix?: string;
}

/** The most stars a word may hide its letters behind and still be read. */
const MAX_MASKS = 2;
/** Longer runs of letters are not words: not read, whatever they hold. */
const MAX_WORD = 64;

/**
 * Reads the words people hide from a filter as the lexicon's words they spell: letters behind
 * stars ("k*ll", "s**cide", "ki*l"), and letters joined by dots ("my.self"). Words and patterns
 * are in matching form: repeated letters collapsed ("kill" is "kil").
 *
 * A character trie over the lexicon's words, with the prefixes its phrases take (`suicid*`, so
 * "suic*der" reads as "suicider"). A pattern is searched with at most two stars and 64
 * characters: its cost is bounded by the vocabulary's branching, not by the text.
 */
export class HiddenWordReader {
  private readonly root: Node = { next: new Map() };

  /** Words shorter than three letters are never read from hidden ones: "U.S." is not "us". */
  constructor(vocabulary: Iterable<string>, prefixes: ReadonlySet<string>) {
    for (const word of vocabulary) {
      if (!/^\p{L}{3,}$/u.test(word)) continue;
      let node = this.root;
      for (const letter of word) {
        let child = node.next.get(letter);
        if (child === undefined) node.next.set(letter, (child = { next: new Map() }));
        node = child;
      }
      node.word = word;
      if (prefixes.has(word)) node.prefix = word;
    }
  }

  /** Whether `letters` is a word of the lexicon, or begins with one of its prefixes. */
  spells(letters: string): boolean {
    let node: Node | undefined = this.root;
    for (const letter of letters) {
      if (node.prefix !== undefined) return true;
      node = node.next.get(letter);
      if (node === undefined) return false;
    }
    return node.word !== undefined;
  }

  /**
   * The one word of the lexicon `pattern` spells, or undefined. A star hides one letter: a letter
   * of the word, or the double of a neighbour that the matching form drops ("ki*l" is "kill").
   * Readings that hide letters of the word come before those that hide doubles; when more than
   * one word remains, nothing is read. `pattern` must hold at most two stars, at least two
   * letters and more letters than stars.
   */
  readMasked(pattern: string): string | undefined {
    if (pattern.length > MAX_WORD) return undefined;
    let masks = 0;
    for (const char of pattern) if (char === '*') masks++;
    const letters = pattern.length - masks;
    if (masks === 0 || masks > MAX_MASKS || letters < 2 || letters <= masks) return undefined;
    // found[d]: the words read with d stars standing for doubles.
    const found = Array.from({ length: masks + 1 }, () => new Set<string>());
    this.search(pattern, 0, this.root, '', 0, found);
    const best = found.find((words) => words.size > 0);
    return best?.size === 1 ? [...best][0] : undefined;
  }

  private search(
    pattern: string,
    at: number,
    node: Node,
    spelled: string,
    doubles: number,
    found: Set<string>[],
  ): void {
    if (at === pattern.length) {
      if (node.word !== undefined) found[doubles].add(node.word);
      return;
    }
    // Past a prefix, the rest of the word is its ending, once no star is left to read.
    if (node.prefix !== undefined && !pattern.includes('*', at)) {
      found[doubles].add(spelled + pattern.slice(at));
    }
    const char = pattern[at];
    if (char !== '*') {
      const child = node.next.get(char);
      if (child !== undefined) this.search(pattern, at + 1, child, spelled + char, doubles, found);
      return;
    }
    for (const [letter, child] of node.next) {
      this.search(pattern, at + 1, child, spelled + letter, doubles, found);
    }
    // The star hides the double of a letter beside it.
    this.search(pattern, at + 1, node, spelled, doubles + 1, found);
  }
}
