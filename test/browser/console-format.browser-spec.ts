import { csvCell, toCsv, visibleId } from '../../web/src/format';

/** The console's CSV downloads (contract §28): cells a spreadsheet must not run as formulas. */
describe('the usage CSV', () => {
  it('keeps each cell one text cell in a spreadsheet that splits on commas or semicolons', () => {
    // A member may name a personality so; an admin downloads the breakdown in a `;` locale.
    expect(csvCell("x;=cmd|'/C calc'!A0;")).toBe(`"x;=cmd|'/C calc'!A0;"`);
    expect(csvCell('a\tb')).toBe('"a\tb"');
    expect(csvCell('=HYPERLINK("x")')).toBe(`"'=HYPERLINK(""x"")"`);
    expect(csvCell('-1+2')).toBe("'-1+2");
    expect(csvCell('Ada, Grace')).toBe('"Ada, Grace"');
    expect(csvCell('plain')).toBe('plain');
    expect(csvCell(12)).toBe('12');
    expect(csvCell(null)).toBe('');
  });

  it('writes RFC 4180 lines', () => {
    expect(toCsv(['name', 'tokens'], [['a;b', 3]])).toBe('name,tokens\r\n"a;b",3\r\n');
  });
});

/** End users' ids as the console shows them: each reads as itself, not as a lookalike. */
describe('visibleId', () => {
  it('shows a plain id as it is, spaces inside included', () => {
    expect(visibleId('bob')).toBe('bob');
    expect(visibleId('Ada Lovelace')).toBe('Ada Lovelace');
    expect(visibleId('שלום')).toBe('שלום');
  });

  it('quotes an id a page would show as another, its unseen spaces written out', () => {
    expect(visibleId(' bob')).toBe('" bob"');
    expect(visibleId('bob ')).toBe('"bob "');
    expect(visibleId('a  b')).toBe('"a  b"');
    expect(visibleId('\u00a0bob')).toBe('"\\u00A0bob"');
    expect(visibleId('bob\u3000')).toBe('"bob\\u3000"');
    expect(visibleId('a\u2009b')).toBe('"a\\u2009b"');
    // Invisible characters too (review): zero-width, word joiner, Hangul filler, a mark of
    // direction, a tag character past the Basic Multilingual Plane.
    expect(visibleId('bob\u200b')).toBe('"bob\\u200B"');
    expect(visibleId('\u2060bob')).toBe('"\\u2060bob"');
    expect(visibleId('\u3164bob')).toBe('"\\u3164bob"');
    expect(visibleId('bob\u200f')).toBe('"bob\\u200F"');
    expect(visibleId('bob\u{E0061}')).toBe('"bob\\u{E0061}"');
  });

  it('escapes quotes and backslashes, so that no id reads as another one written out', () => {
    // The id that holds a real U+00A0 and the one that holds its spelling differ.
    expect(visibleId('\\u00A0bob')).toBe('"\\\\u00A0bob"');
    expect(visibleId('\u00a0bob')).toBe('"\\u00A0bob"');
    expect(visibleId('say "hi"')).toBe('"say \\"hi\\""');
  });
});
