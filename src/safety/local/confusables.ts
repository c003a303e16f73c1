// Unicode's confusables.txt (UTS #39), 13.0.0, as the `unhomoglyph` package ships it: each
// character that can be mistaken for another, with its prototype (the TR39 skeleton's mapping).
import CONFUSABLES from 'unhomoglyph/data.json';

/**
 * Per code point, what a look-alike of Latin letters or digits reads as, in lower case: the TR39
 * skeleton's mapping, kept where its prototype is ASCII letters or digits once accents are dropped
 * (a Cyrillic "е" is "e", a Greek "ο" is "o", "ł" is "l", "×" is "x").
 *
 * Two departures, both because a classifier reads text rather than comparing identifiers:
 * - ASCII is left as it is written: the table's `m` → `rn`, `1` → `l`, `0` → `O` and `I` → `l` make
 *   identifiers comparable but would unmake words, numbers and leetspeak, which the normaliser
 *   reads by its own rules.
 * - A capital whose prototype is `l` (Cyrillic "І", Greek "Ι", the palochka) looks like a capital
 *   I, which the table spells `l` only because it folds `I` to `l`: it reads as "i".
 */
function latinFolds(): ReadonlyMap<number, string> {
  const folds = new Map<number, string>();
  for (const [source, prototype] of Object.entries(CONFUSABLES as Record<string, string>)) {
    const code = source.codePointAt(0);
    if (code === undefined || code < 0x80 || String.fromCodePoint(code) !== source) continue;
    const letters = prototype.normalize('NFKD').replace(/\p{M}/gu, '');
    if (!/^[A-Za-z0-9]+$/.test(letters)) continue;
    const isCapital = source.toLowerCase() !== source;
    folds.set(code, isCapital && letters === 'l' ? 'i' : letters.toLowerCase());
  }
  return folds;
}

/**
 * Look-alikes the table leaves out, as people use them to hide a word from a filter (found by
 * review): lower-case Cyrillic and Greek letters shaped as Latin ones ("кill", "мyself", "κill"),
 * small capitals ("ᴋɪʟʟ"), and the squared and negative enclosed letters of emoji keyboards
 * ("🅺🅸🅻🅻"). Regional indicators stay: two make a flag, which is no word. These win over the
 * table: its "ғ" is an "r" with a stroke, which in "ᴍʏsᴇʟғ" stands for an "f".
 */
function beyondTheTable(): ReadonlyMap<number, string> {
  const folds = new Map<number, string>(
    Object.entries({
      к: 'k',
      т: 't',
      м: 'm',
      н: 'h',
      п: 'n',
      г: 'r',
      ш: 'w',
      κ: 'k',
      τ: 't',
      ν: 'v',
      ᴀ: 'a',
      ʙ: 'b',
      ᴄ: 'c',
      ᴅ: 'd',
      ᴇ: 'e',
      ꜰ: 'f',
      ɢ: 'g',
      ʜ: 'h',
      ɪ: 'i',
      ᴊ: 'j',
      ᴋ: 'k',
      ʟ: 'l',
      ᴍ: 'm',
      ɴ: 'n',
      ᴏ: 'o',
      ᴘ: 'p',
      ʀ: 'r',
      ꜱ: 's',
      ᴛ: 't',
      ᴜ: 'u',
      ᴠ: 'v',
      ᴡ: 'w',
      ʏ: 'y',
      ᴢ: 'z',
      ғ: 'f',
    }).map(([letter, latin]) => [letter.codePointAt(0)!, latin]),
  );
  // 🄰…🅉 squared, 🅐…🅩 negative circled, 🅰…🆉 negative squared: A to Z each.
  for (const first of [0x1f130, 0x1f150, 0x1f170]) {
    for (let letter = 0; letter < 26; letter++) {
      folds.set(first + letter, String.fromCharCode(0x61 + letter));
    }
  }
  return folds;
}

const FOLDS: ReadonlyMap<number, string> = new Map([...latinFolds(), ...beyondTheTable()]);

/** Any character outside ASCII: text without one has nothing to fold. */
const NON_ASCII = /[^\u0000-\u007f]/; // eslint-disable-line no-control-regex -- a range, not a control

/**
 * `text` with every look-alike of Latin letters or digits replaced by what it looks like
 * ("stаb" with a Cyrillic "а" → "stab"). One pass; text in ASCII is returned as it is.
 */
export function foldConfusables(text: string): string {
  if (!NON_ASCII.test(text)) return text;
  let out = '';
  let copiedUpTo = 0;
  for (let at = 0; at < text.length;) {
    const code = text.codePointAt(at) ?? 0;
    const width = code > 0xffff ? 2 : 1;
    const folded = code < 0x80 ? undefined : FOLDS.get(code);
    if (folded !== undefined) {
      out += text.slice(copiedUpTo, at) + folded;
      copiedUpTo = at + width;
    }
    at += width;
  }
  return copiedUpTo === 0 ? text : out + text.slice(copiedUpTo);
}

/** Format characters and default-ignorable code points: zero-width spaces and joiners, fillers. */
const DRAWS_NOTHING = /[\p{Cf}\p{Default_Ignorable_Code_Point}]+/gu;

/**
 * The text as a person reads it, for a classifier that reads text itself (the provider's model):
 * compatibility forms composed (NFKC), look-alikes of Latin letters folded, what draws nothing
 * dropped; case, accents and punctuation kept. Text with none of these is returned as it is.
 */
export function asRead(text: string): string {
  return foldConfusables(text.normalize('NFKC')).replace(DRAWS_NOTHING, '');
}
