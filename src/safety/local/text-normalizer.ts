import { foldConfusables } from './confusables';
import { HiddenWordReader } from './hidden-words';

/** How a token is separated from the one before it: not at all, by a clause break, a sentence break. */
export type BreakBefore = 0 | 1 | 2;
export const CLAUSE_BREAK = 1;
export const SENTENCE_BREAK = 2;

export interface Token {
  /** The matching form: folded, leetspeak read, repeated letters collapsed ("Diiiie" → "die"). */
  readonly text: string;
  readonly breakBefore: BreakBefore;
  /** The quoted span (1, 2, …) the token sits in, 0 outside quotation marks. */
  readonly quote: number;
  readonly isNumber: boolean;
}

export interface NormalizedText {
  readonly tokens: Token[];
  /** quoteStarts[q] and quoteEnds[q]: the first token of quoted span q and the one after its last. */
  readonly quoteStarts: number[];
  readonly quoteEnds: number[];
}

/** A word as it came, before leetspeak, apostrophes and repeated letters are read. */
interface RawToken {
  raw: string;
  breakBefore: BreakBefore;
  quote: number;
  /**
   * Separated from the previous token by at most 3 of " .,-_*·/": how "k i l l", "s.u.i.c.i.d.e"
   * and "k,i,l,l" are written.
   */
  tightBefore: boolean;
  /** Joined to the previous token by one hyphen, as the parts of a compound ("self-esteem"). */
  hyphenBefore: boolean;
}

// Letters the compatibility decomposition leaves whole, by code point.
const LETTER_FOLDS = new Map<number, string>(
  Object.entries({ ß: 'ss', œ: 'oe', æ: 'ae', ø: 'o', ł: 'l', đ: 'd', ı: 'i', þ: 'th' }).map(
    ([letter, folded]) => [letter.charCodeAt(0), folded],
  ),
);

const LEET: Record<string, string> = {
  '0': 'o',
  '1': 'i',
  '3': 'e',
  '4': 'a',
  '5': 's',
  '7': 't',
  '9': 'g',
  $: 's',
  '@': 'a',
  '!': 'i',
  '|': 'l',
  '€': 'e',
};

/**
 * Emoji that stand for a word in a threat ("I'm going to 🔪 him") or a laugh. Every other emoji
 * separates words and means nothing, so a message of emoji alone is clean.
 */
const EMOJI_WORDS = new Map<number, string>([
  [0x1f52a, 'knife'],
  [0x1f5e1, 'knife'],
  [0x1f52b, 'gun'],
  [0x1f4a3, 'bomb'],
  [0x1f602, 'lol'],
  [0x1f923, 'lol'],
  [0x1f606, 'lol'],
  [0x1f639, 'lol'],
]);

/**
 * Whether the dot at `at` is one of a run of three or more: one of the three windows of three
 * characters around it is all dots. Looking only at its neighbours keeps a text of dots linear;
 * measuring the run from each dot took 3.6 s on 40,000 of them (found by review).
 */
function inEllipsis(text: string, at: number): boolean {
  const dot = (i: number) => i >= 0 && i < text.length && text.charCodeAt(i) === PERIOD;
  return (
    (dot(at - 2) && dot(at - 1)) || (dot(at - 1) && dot(at + 1)) || (dot(at + 1) && dot(at + 2))
  );
}

// Characters are classified by code point: hashing one-character strings is what costs.
const codesOf = (chars: string): Set<number> =>
  new Set([...chars].map((char) => char.codePointAt(0) ?? 0));
const SENTENCE_ENDS = codesOf('.!?;\n\r¿¡。');
const CLAUSE_MARKS = codesOf(',:()[]{}–—•');
const TIGHT_SEPARATORS = codesOf(' .,-_*·/');
const QUOTE_MARKS = codesOf('"“”„‟«»「」『』〝〞');
const APOSTROPHES = codesOf("'’‘`ʼ");
const LEET_SYMBOLS = codesOf('$@!|€');
/** A letter hidden behind a star ("k*ll", "s**cide"). */
const MASK = 0x2a;
/** Marks that hide a letter as a star does, between letters only ("k#ll", "k_ll"; "c#" is left). */
const MASK_STANDINS: ReadonlySet<number> = codesOf('#^_');
const HYPHEN = 0x2d;
const SPACE = 0x20;
const NEWLINE = 0x0a;
const RETURN = 0x0d;
const EXCLAMATION = 0x21;
const DOLLAR = 0x24;
const AT = 0x40;
const PIPE = 0x7c;
const PERIOD = 0x2e;
const COMMA = 0x2c;

// English clitics after an apostrophe: joined as people type them without one ("dont", "im").
const ENGLISH_CLITICS = new Set(['t', 'm', 'll', 've', 're', 'd', 's']);
// French elisions: split and restored ("j'ai" → "je ai").
const FRENCH_ELISIONS: Record<string, string> = {
  j: 'je',
  m: 'me',
  t: 'te',
  s: 'se',
  n: 'ne',
  l: 'le',
  c: 'ce',
  d: 'de',
  qu: 'que',
  jusqu: 'jusque',
  lorsqu: 'lorsque',
  puisqu: 'puisque',
  quelqu: 'quelque',
};

/**
 * Chat spellings read as the words they stand for. Keys are compared in matching form, so each
 * must not collide with an ordinary word of another of the four languages.
 */
const SPELLINGS: Record<string, string> = {
  gonna: 'going to',
  wanna: 'want to',
  gotta: 'got to',
  tryna: 'trying to',
  kms: 'kill myself',
  kys: 'kill yourself',
  unalive: 'kill',
  unalived: 'killed',
  unaliving: 'killing',
  sewerslide: 'suicide',
  sucide: 'suicide',
  suicde: 'suicide',
  suiside: 'suicide',
  u: 'you',
  nich: 'nicht',
  j: 'je',
  g: 'je ai',
  jai: 'je ai',
  jsuis: 'je suis',
  jss: 'je suis',
  chui: 'je suis',
  jveux: 'je veux',
  jvais: 'je vais',
  jpense: 'je pense',
  jpeux: 'je peux',
  jme: 'je me',
  jsais: 'je sais',
  jen: 'je en',
  jcrois: 'je crois',
  jvoudrais: 'je voudrais',
  q: 'que',
  xq: 'porque',
  pq: 'porque',
  kiero: 'quiero',
};

/**
 * Runs of one letter become one letter: "diiiie" and "die", "kill" and "kil" match alike. Digits
 * and the stars of a masked word ("s**cide": two hidden letters) stay as they are.
 */
export function collapseRepeats(word: string): string {
  let out = '';
  let previous = '';
  for (const char of word) {
    if (char !== previous || isDigit(char) || char === '*') out += char;
    previous = char;
  }
  return out;
}

function isDigit(char: string): boolean {
  return char >= '0' && char <= '9';
}

function isDigitCode(code: number | undefined): boolean {
  return code !== undefined && code >= 0x30 && code <= 0x39;
}

const LETTER_OR_NUMBER = /^[\p{L}\p{N}]$/u;
/**
 * Marks, format characters (zero-width spaces and joiners, bidirectional controls, the soft
 * hyphen) and the other default-ignorable code points (the Hangul filler, variation selectors):
 * they draw nothing between the letters a person reads.
 */
const INVISIBLE = /[\p{M}\p{Cf}\p{Default_Ignorable_Code_Point}]+/gu;

const NUMBER = /^\d+(?:[.,]\d+)?$/;
const LEADING_DIGITS = /^(\d+)(\D.*)$/;
const MAX_SEGMENTED_RUN = 48;

/**
 * Turns text into tokens for the phrase matcher, reading it as a person reads it. One linear pass
 * over the text plus linear post-processing; nothing here backtracks.
 *
 * - Unicode compatibility folding (NFKD, which covers what NFKC folds: full-width, ligatures,
 *   mathematical letters), then look-alike letters of other scripts folded to the Latin ones by
 *   Unicode's confusables (the TR39 skeleton: a Cyrillic "е" is "e"; `confusables.ts`), lower
 *   case, accents and everything that draws nothing dropped (zero-width spaces and joiners, the
 *   soft hyphen, the Hangul filler, bidirectional controls), ß → ss, œ → oe.
 * - Leetspeak inside words: "k1ll", "d13", "$uicide", "m@ke"; a number before letters stays a
 *   number ("14yo" → 14, yo) so ages survive.
 * - Apostrophes: English contractions joined as typed without one ("don't" → "dont"), French
 *   elisions restored ("j'ai" → "je ai"), a few chat spellings expanded ("wanna", "kms", "jveux").
 * - Hidden words (`hidden-words.ts`): letters masked by stars ("k*ll", "s**cide") and words with
 *   dots between letters ("my.self", "k.i.l.l") read as the lexicon's word they spell; otherwise
 *   split where the stars and dots are.
 * - Chat readings that need a neighbour: "2" for "to" after a verb of intent ("going 2 end it"),
 *   "sewer slide" for "suicide", "unalive" with no object for "die".
 * - Spaced and dotted letters ("k i l l", "s.u.i.c.i.d.e", "k,i,l,l"): three or more single
 *   letters in a row are joined, then split into known words when they spell a phrase ("i w a n t
 *   t o d i e"). The dots between letters spelled out and the one closing them ("k.i.l.l.",
 *   "e.g.") end no sentence.
 * - Repeated letters collapsed, in the text and in the lexicon alike.
 * - Sentence breaks (. ! ? ; newline; not three dots, a pause), clause breaks (, : brackets,
 *   dashes) and quoted spans (" “ ” „ « » and single quotes around words) are recorded for the
 *   rules that read context.
 */
export class TextNormalizer {
  /** Per BMP code point: 0 not yet known, 1 letter or digit, 2 neither. */
  private readonly wordCodes = new Uint8Array(0x10000);
  private readonly spellings = new Map<string, string[]>();
  private readonly longestWord: number;
  private readonly hidden: HiddenWordReader;

  /**
   * `vocabulary`: the lexicon's words in matching form, to split runs of spaced letters into and
   * to read masked and dotted words as; `prefixes`: those of its words phrases take as prefixes.
   */
  constructor(
    private readonly vocabulary: ReadonlySet<string> = new Set(),
    prefixes: ReadonlySet<string> = new Set(),
  ) {
    for (const [spelling, words] of Object.entries(SPELLINGS)) {
      this.spellings.set(collapseRepeats(spelling), words.split(' ').map(collapseRepeats));
    }
    let longest = 0;
    for (const word of vocabulary) longest = Math.max(longest, word.length);
    this.longestWord = longest;
    this.hidden = new HiddenWordReader(vocabulary, prefixes);
  }

  /** A lexicon phrase's words in matching form, by the same rules as the text. */
  words(phrase: string): string[] {
    return this.normalize(phrase).tokens.map((token) => token.text);
  }

  normalize(text: string): NormalizedText {
    // TR39's skeleton order: decompose, fold look-alikes, drop what draws nothing.
    const folded = foldConfusables(text.normalize('NFKD')).toLowerCase().replace(INVISIBLE, '');
    const { raws, quoteCount } = this.scan(folded);
    return this.finish(
      joinSewerSlide(joinSpacedReflexives(this.joinSpacedLetters(raws))),
      quoteCount,
    );
  }

  private isWordCode(code: number | undefined): boolean {
    if (code === undefined) return false;
    if (code < 0x80) return (code >= 0x61 && code <= 0x7a) || isDigitCode(code);
    if (code >= 0x10000) return LETTER_OR_NUMBER.test(String.fromCodePoint(code));
    let known = this.wordCodes[code];
    if (known === 0) {
      known = LETTER_FOLDS.has(code) || LETTER_OR_NUMBER.test(String.fromCharCode(code)) ? 1 : 2;
      this.wordCodes[code] = known;
    }
    return known === 1;
  }

  private scan(text: string): { raws: RawToken[]; quoteCount: number } {
    const raws: RawToken[] = [];
    let word = '';
    /** The word holds a star or a dot between letters, to be read when it ends. */
    let hiddenWord = false;
    let pendingBreak: BreakBefore = 0;
    let gapLength = 0;
    let gapTight = true;
    let gapFirst = -1;
    let quote = 0;
    let quoteCount = 0;
    let singleQuoted = false;

    const separate = (code: number, strength: BreakBefore): void => {
      flush();
      if (strength > pendingBreak) pendingBreak = strength;
      if (gapLength === 0) gapFirst = code;
      gapLength += 1;
      if (!TIGHT_SEPARATORS.has(code)) gapTight = false;
    };
    const push = (raw: string): void => {
      raws.push({
        raw,
        breakBefore: pendingBreak,
        quote,
        tightBefore: raws.length > 0 && gapTight && gapLength <= 3,
        hyphenBefore: raws.length > 0 && gapLength === 1 && gapFirst === HYPHEN,
      });
      pendingBreak = 0;
      gapLength = 0;
      gapTight = true;
      gapFirst = -1;
    };
    /**
     * Ends the word. One with masked letters or inner dots ("k*ll", "my.self", "k.i.l.l") is read
     * as the lexicon's word it spells, or else split where the stars and dots are, as separators
     * would have split it. Whether the word was spelled out with dots: its closing dot is part of
     * it ("k.i.l.l.", "e.g."), not a sentence end.
     */
    const flush = (): boolean => {
      if (word === '') return false;
      const hidden = word;
      word = '';
      if (!hiddenWord) {
        push(hidden);
        return false;
      }
      hiddenWord = false;
      let trailingMasks = 0;
      while (hidden.endsWith('*', hidden.length - trailingMasks)) trailingMasks++;
      const inner = hidden.slice(0, hidden.length - trailingMasks);
      const spelled = this.readHidden(inner);
      const pieces = inner.split(/([.*])/);
      // "e.g", "u.s.a": letters spelled out, whose dots end no sentence.
      const singleLetters = pieces.every((piece) => piece.length <= 1);
      if (spelled !== undefined) {
        push(spelled);
      } else {
        for (const piece of pieces) {
          if (piece === '.' || piece === '*') {
            if (piece === '.' && !singleLetters && SENTENCE_BREAK > pendingBreak) {
              pendingBreak = SENTENCE_BREAK;
            }
            gapLength += 1;
          } else if (piece !== '') {
            push(piece);
          }
        }
      }
      gapLength += trailingMasks;
      return inner.includes('.') && (spelled !== undefined || singleLetters);
    };
    const openQuote = (single: boolean): void => {
      flush();
      quoteCount += 1;
      quote = quoteCount;
      singleQuoted = single;
      if (CLAUSE_BREAK > pendingBreak) pendingBreak = CLAUSE_BREAK;
    };
    const closeQuote = (): void => {
      flush();
      quote = 0;
      singleQuoted = false;
      if (CLAUSE_BREAK > pendingBreak) pendingBreak = CLAUSE_BREAK;
    };

    for (let i = 0; i < text.length;) {
      const code = text.codePointAt(i) ?? 0;
      const width = code > 0xffff ? 2 : 1;
      const previous = i > 0 ? text.charCodeAt(i - 1) : undefined;
      const next = text.codePointAt(i + width);

      if (this.isWordCode(code)) {
        word += LETTER_FOLDS.get(code) ?? text.slice(i, i + width);
      } else if (
        (code === PERIOD || code === COMMA) &&
        isDigitCode(previous) &&
        isDigitCode(next)
      ) {
        word += text[i];
      } else if (
        word !== '' &&
        MASK_STANDINS.has(code) &&
        (next === MASK || (next !== undefined && MASK_STANDINS.has(next)) || this.isWordCode(next))
      ) {
        // "k#ll", "k^ll": read as a star is (found by review).
        word += '*';
        hiddenWord = true;
      } else if (
        word !== '' &&
        ((code === MASK && (next === MASK || this.isWordCode(next))) ||
          (code === PERIOD && this.isWordCode(next) && !isDigitCode(next)))
      ) {
        // A star or a dot between letters: the word is read whole when it ends (`flush`).
        word += text[i];
        hiddenWord = true;
      } else if (code === PIPE && word !== '') {
        // Pipes after letters are leetspeak when the word goes on after them ("k|ll", "ki||ng"),
        // or when, read as ls, they make a word of the lexicon of letters that were none ("ki||":
        // found by review); otherwise punctuation ("die||", "suicide||", Discord's ||spoilers||:
        // found by review of that).
        let end = i + 1;
        while (text.charCodeAt(end) === PIPE) end++;
        const run = text.slice(i, end);
        const spells = (letters: string) =>
          this.hidden.spells(collapseRepeats(this.readSymbols(letters)));
        if (this.isWordCode(text.codePointAt(end)) || (!spells(word) && spells(word + run))) {
          word += run;
          i = end - width;
        } else {
          separate(code, 0);
        }
      } else if (LEET_SYMBOLS.has(code)) {
        // Symbols inside a word are leetspeak ("k!ll", "$uicide"); elsewhere punctuation.
        const inWord =
          (word !== '' && this.isWordCode(next)) ||
          ((code === DOLLAR || code === AT) && this.isWordCode(next) && !isDigitCode(next));
        if (inWord) word += text[i];
        else separate(code, code === EXCLAMATION ? SENTENCE_BREAK : 0);
      } else if (APOSTROPHES.has(code)) {
        if (word !== '' && this.isWordCode(next)) word += "'";
        else if (singleQuoted && !this.isWordCode(next)) closeQuote();
        else if (quote === 0 && word === '' && this.isWordCode(next)) openQuote(true);
        else separate(code, 0);
      } else if (QUOTE_MARKS.has(code)) {
        if (quote !== 0) closeQuote();
        else openQuote(false);
      } else if (code === PERIOD && inEllipsis(text, i)) {
        // "i want to... die": three dots (and "…", folded to them) are a pause in chat, not a
        // sentence's end; a phrase reads across them (found by review).
        separate(code, 0);
      } else if (SENTENCE_ENDS.has(code)) {
        const closesSpelling = code === PERIOD && flush();
        separate(code, closesSpelling ? 0 : SENTENCE_BREAK);
        // A quotation left open ends with its line.
        if ((code === NEWLINE || code === RETURN) && quote !== 0) closeQuote();
      } else if (CLAUSE_MARKS.has(code)) {
        separate(code, CLAUSE_BREAK);
      } else {
        const emojiWord = EMOJI_WORDS.get(code);
        if (emojiWord !== undefined) {
          flush();
          push(emojiWord);
        } else {
          separate(code === SPACE || /\s/.test(text[i]) ? SPACE : code, 0);
        }
      }
      i += width;
    }
    flush();
    return { raws, quoteCount };
  }

  /**
   * The lexicon's word a word with masked letters or inner dots spells ("k*ll", "s**cide",
   * "my.self", "k.i.l.l"), in matching form; undefined when it spells none.
   */
  private readHidden(word: string): string | undefined {
    const letters = collapseRepeats(readLeetspeak(word.replaceAll('.', '')));
    if (!/^[\p{L}*]+$/u.test(letters)) return undefined;
    if (letters.includes('*')) return this.hidden.readMasked(letters);
    return letters.length >= 3 && this.hidden.spells(letters) ? letters : undefined;
  }

  /** A word's digits and symbols read as letters, its pipes as ls or is (readPipes). */
  private readSymbols(word: string): string {
    return word.includes('|') ? this.readPipes(word) : readLeetspeak(word);
  }

  /**
   * A word holding pipes, each an l or an i to the eye: its usual reading (readLeetspeak) if that
   * spells a word of the lexicon, else the first reading of its pipes as ls and is that does
   * ("k||l", "su|c|de": found by review), else the usual one. A word of more than
   * MAX_READ_PIPES pipes is read the usual way only: the readings double with each.
   */
  private readPipes(word: string): string {
    const usual = readLeetspeak(word);
    const pipes = word.split('|').length - 1;
    if (pipes > MAX_READ_PIPES || this.hidden.spells(collapseRepeats(usual))) return usual;
    for (let choice = 0; choice < 1 << pipes; choice++) {
      let pipe = 0;
      const reading = readLeetspeak(
        word.replace(/\|/g, () => ((choice >> pipe++) & 1 ? 'i' : 'l')),
      );
      if (this.hidden.spells(collapseRepeats(reading))) return reading;
    }
    return usual;
  }

  /** Three or more single letters, tightly spaced: one word, or the known words they spell. */
  private joinSpacedLetters(raws: RawToken[]): RawToken[] {
    const out: RawToken[] = [];
    const isSingleLetter = (token: RawToken): boolean =>
      token.raw.length === 1 && !isDigit(token.raw);
    let i = 0;
    while (i < raws.length) {
      let end = i;
      if (isSingleLetter(raws[i])) {
        end = i + 1;
        while (
          end < raws.length &&
          isSingleLetter(raws[end]) &&
          raws[end].tightBefore &&
          raws[end].quote === raws[i].quote
        ) {
          end++;
        }
      }
      if (end - i >= 3) {
        const joined = raws
          .slice(i, end)
          .map((token) => token.raw)
          .join('');
        const words = this.segment(joined) ?? [joined];
        words.forEach((raw, index) =>
          out.push({
            raw,
            breakBefore: index === 0 ? raws[i].breakBefore : 0,
            quote: raws[i].quote,
            tightBefore: false,
            hyphenBefore: false,
          }),
        );
        i = end;
      } else {
        out.push(raws[i]);
        i++;
      }
    }
    return out;
  }

  /** The fewest known words that spell `letters` exactly, or null. Bounded: short runs only. */
  private segment(letters: string): string[] | null {
    if (letters.length > MAX_SEGMENTED_RUN || this.vocabulary.size === 0) return null;
    const best: (string[] | null)[] = new Array<string[] | null>(letters.length + 1).fill(null);
    best[0] = [];
    for (let start = 0; start < letters.length; start++) {
      const before = best[start];
      if (before === null) continue;
      const limit = Math.min(letters.length, start + this.longestWord * 3);
      for (let end = start + 1; end <= limit; end++) {
        const word = collapseRepeats(letters.slice(start, end));
        if (!this.vocabulary.has(word)) continue;
        const candidate = best[end];
        if (candidate === null || candidate.length > before.length + 1) {
          best[end] = [...before, word];
        }
      }
    }
    return best[letters.length];
  }

  private finish(raws: RawToken[], quoteCount: number): NormalizedText {
    const tokens: Token[] = [];
    const quoteStarts = new Array<number>(quoteCount + 1).fill(-1);
    const quoteEnds = new Array<number>(quoteCount + 1).fill(-1);
    raws.forEach((raw, index) => {
      let breakBefore = raw.breakBefore;
      const next = raws[index + 1];
      // "i want to unalive (tonight)": the word without an object (found by review).
      const words =
        plainWord(raw.raw) === UNALIVE &&
        (next === undefined || next.breakBefore !== 0 || !OBJECT_STARTS.has(plainWord(next.raw)))
          ? UNALIVE_ALONE
          : this.readWord(raw.raw);
      for (const [text, isNumber] of words) {
        if (raw.quote !== 0) {
          if (quoteStarts[raw.quote] === -1) quoteStarts[raw.quote] = tokens.length;
          quoteEnds[raw.quote] = tokens.length + 1;
        }
        tokens.push({ text, breakBefore, quote: raw.quote, isNumber });
        breakBefore = 0;
      }
    });
    return { tokens: readTwoAsTo(tokens), quoteStarts, quoteEnds };
  }

  /** One written word → its words in matching form, with whether each is a number. */
  private readWord(raw: string): [string, boolean][] {
    if (NUMBER.test(raw)) return [[raw, true]];
    const out: [string, boolean][] = [];
    let rest = raw;
    const leading = LEADING_DIGITS.exec(raw);
    if (leading) {
      out.push([leading[1], true]);
      rest = leading[2];
    }
    rest = this.readSymbols(rest);
    for (const part of splitApostrophes(rest)) {
      const word = collapseRepeats(part);
      if (word === '') continue;
      const spelled = this.spellings.get(word);
      if (spelled) for (const each of spelled) out.push([each, false]);
      else out.push([word, NUMBER.test(word)]);
    }
    return out;
  }
}

const UNALIVE = 'unalive';
/** Words an object of "unalive" begins with: "unalive him", "unalive my …", "unalive the …". */
const OBJECT_STARTS = new Set(
  [
    'me',
    'myself',
    'you',
    'yourself',
    'him',
    'himself',
    'her',
    'herself',
    'them',
    'themselves',
    'us',
    'it',
    'my',
    'your',
    'his',
    'their',
    'our',
    'the',
    'a',
    'an',
    'this',
    'that',
    'these',
    'those',
    'everyone',
    'everybody',
    'someone',
    'somebody',
    'people',
    'u',
    'ur',
  ].map(collapseRepeats),
);

/** Without an object, "unalive" is to die: whose death the subject rules then read. */
const UNALIVE_ALONE: [string, boolean][] = [['die', false]];

/** Words after which a "2" is "to" ("going 2 kill myself", "how 2 end it"), in matching form. */
const TWO_AS_TO_AFTER = new Set(
  [
    'want',
    'wanted',
    'going',
    'need',
    'needed',
    'trying',
    'try',
    'ready',
    'deserve',
    'decided',
    'plan',
    'planning',
    'wish',
    'tempted',
    'how',
    'about',
    'supposed',
  ].map(collapseRepeats),
);
/** After the "2", the words that keep it a number: "want 2 years off", "about 2 weeks". */
const COUNTED = new Set(
  [
    'year',
    'years',
    'yr',
    'yrs',
    'yo',
    'month',
    'months',
    'week',
    'weeks',
    'day',
    'days',
    'hour',
    'hours',
    'minute',
    'minutes',
    'kids',
    'children',
    'more',
  ].map(collapseRepeats),
);
/** "2" for "to" after the words above (found by review; "want 2 die" was a phrase of its own). */
function readTwoAsTo(tokens: Token[]): Token[] {
  const out: Token[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i];
    const previous = tokens[i - 1];
    const next = tokens[i + 1];
    const joinedToNext = next !== undefined && next.breakBefore === 0;
    if (
      token.text === '2' &&
      token.breakBefore === 0 &&
      previous !== undefined &&
      TWO_AS_TO_AFTER.has(previous.text) &&
      joinedToNext &&
      !next.isNumber &&
      !COUNTED.has(next.text)
    ) {
      out.push({ ...token, text: 'to', isNumber: false });
    } else {
      out.push(token);
    }
  }
  return out;
}

/** Owners of a reflexive written as two words: "my self" is "myself", "your selves" "yourselves". */
const REFLEXIVE_OWNERS = new Set(['my', 'your', 'our', 'them', 'him', 'her', 'it', 'one']);

/**
 * What follows "self" in a compound also written without its hyphen: "hurt my self esteem" is
 * about esteem, and must not read as "hurt myself".
 */
const SELF_COMPOUND_PARTS = new Set(
  [
    'esteem',
    'worth',
    'confidence',
    'image',
    'respect',
    'care',
    'control',
    'doubt',
    'love',
    'hate',
    'hatred',
    'harm',
    'harming',
    'injury',
    'pity',
    'talk',
    'awareness',
    'conscious',
    'consciousness',
    'discipline',
    'belief',
    'improvement',
    'sabotage',
    'defense',
    'defence',
    'interest',
    'portrait',
    'expression',
    'destruction',
    'destructive',
    'medication',
    'medicating',
  ].map(collapseRepeats),
);

/** A written word's letters in matching form, for comparing it with a plain word. */
const plainWord = (raw: string): string => collapseRepeats(readLeetspeak(raw));

/**
 * "my self", "your selves": one word, as the lexicons write it ("kill my self" is "kill myself";
 * found by review, 2026-12-05: the two-word spelling passed the self-harm lexicon). Not across a
 * break or a quotation mark, nor when "self" begins a compound ("my self-esteem", "my self
 * esteem").
 */
function joinSpacedReflexives(raws: RawToken[]): RawToken[] {
  const out: RawToken[] = [];
  for (let i = 0; i < raws.length; i++) {
    const owner = raws[i];
    const self = raws[i + 1];
    const after = raws[i + 2];
    const selfWord = self === undefined ? '' : plainWord(self.raw);
    const joins =
      (selfWord === 'self' || selfWord === 'selves') &&
      self.breakBefore === 0 &&
      self.quote === owner.quote &&
      REFLEXIVE_OWNERS.has(plainWord(owner.raw)) &&
      !(
        after !== undefined &&
        after.breakBefore === 0 &&
        (after.hyphenBefore || SELF_COMPOUND_PARTS.has(plainWord(after.raw)))
      );
    if (joins) {
      out.push({ ...owner, raw: plainWord(owner.raw) + selfWord });
      i++;
    } else {
      out.push(owner);
    }
  }
  return out;
}

/** "sewer slide", a spoken spelling of "suicide" (found by review), as one word; not across a break. */
function joinSewerSlide(raws: RawToken[]): RawToken[] {
  const out: RawToken[] = [];
  for (let i = 0; i < raws.length; i++) {
    const next = raws[i + 1];
    if (
      plainWord(raws[i].raw) === 'sewer' &&
      next !== undefined &&
      next.breakBefore === 0 &&
      next.quote === raws[i].quote &&
      plainWord(next.raw) === 'slide'
    ) {
      out.push({ ...raws[i], raw: 'suicide' });
      i++;
    } else {
      out.push(raws[i]);
    }
  }
  return out;
}

/** The pipes of a word whose readings (an l or an i each) are tried against the lexicon. */
const MAX_READ_PIPES = 3;

/**
 * Digits and symbols inside a word read as the letters they imitate; "11" and "||" read as "ll",
 * and a pipe before an l as an i ("k|ll": a pipe is an l or an I to the eye, found by review).
 */
function readLeetspeak(word: string): string {
  if (!/[0-9$@!|€]/.test(word) || !/\p{L}/u.test(word)) return word;
  return word.replace(/11+|\|\|+|[0-9$@!|€]/g, (symbol, at: number) => {
    if (symbol.length > 1) return 'l'.repeat(symbol.length);
    if (symbol === '|' && (word[at + 1] === 'l' || word[at + 1] === 'L')) return 'i';
    return LEET[symbol] ?? symbol;
  });
}

function splitApostrophes(word: string): string[] {
  if (!word.includes("'")) return [word];
  const parts = word.split("'").filter((part) => part !== '');
  const out: string[] = [];
  let current = parts[0] ?? '';
  for (const right of parts.slice(1)) {
    const elided = FRENCH_ELISIONS[current];
    if (elided !== undefined) {
      out.push(elided);
      current = right;
    } else if (current === 'i' && right === 'll') {
      out.push('i');
      current = 'will';
    } else if (ENGLISH_CLITICS.has(right)) {
      current += right;
    } else {
      out.push(current);
      current = right;
    }
  }
  out.push(current);
  return out;
}
