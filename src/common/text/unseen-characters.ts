/**
 * The characters a page draws as nothing, as a regular expression's class body (for the `u`
 * flag): format characters (zero-width space, joiners, marks of direction, soft hyphen, tags),
 * default-ignorable code points (U+3164 HANGUL FILLER) and U+2800 BRAILLE PATTERN BLANK, a symbol
 * to Unicode that draws as a space. One definition for the names the API refuses
 * (visible-text.ts), the addresses it refuses (new-address.ts) and the ids the console writes out
 * (web/src/format.ts, which imports this file: it has no imports of its own).
 */
export const UNSEEN_CHARACTERS = '\\p{Cf}\\p{Default_Ignorable_Code_Point}\\u2800';
