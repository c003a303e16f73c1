import { HiddenWordReader } from './hidden-words';

describe('HiddenWordReader', () => {
  // In matching form: repeated letters collapsed ("kill" is "kil").
  const reader = new HiddenWordReader(
    ['kil', 'die', 'dye', 'suicide', 'suicid', 'bomb', 'bomba', 'my', 'us'],
    new Set(['suicid']),
  );

  it('reads a star as one hidden letter of a lexicon word', () => {
    expect(reader.readMasked('k*l')).toBe('kil');
    expect(reader.readMasked('b*mb')).toBe('bomb');
    expect(reader.readMasked('b*mba')).toBe('bomba');
    expect(reader.readMasked('s**cide')).toBe('suicide');
    expect(reader.readMasked('su*c*de')).toBe('suicide');
  });

  it('reads a star as a doubled letter only when no word has a letter there', () => {
    expect(reader.readMasked('ki*l')).toBe('kil');
  });

  it('reads the ending of a word the lexicon takes as a prefix', () => {
    expect(reader.readMasked('suic*der')).toBe('suicider');
    expect(reader.readMasked('s*icidaires')).toBe('suicidaires');
  });

  it('reads nothing when two words fit, or none, or too little is left to read', () => {
    expect(reader.readMasked('d*e')).toBeUndefined(); // die or dye
    expect(reader.readMasked('h*py')).toBeUndefined();
    expect(reader.readMasked('m*')).toBeUndefined(); // one letter left
    expect(reader.readMasked('b**b')).toBeUndefined(); // as many stars as letters
    expect(reader.readMasked('s*i*i*e')).toBeUndefined(); // three stars
    expect(reader.readMasked('kil')).toBeUndefined(); // nothing hidden
    expect(reader.readMasked(`k*l${'a'.repeat(10_000)}`)).toBeUndefined();
  });

  it('tells whether letters are a lexicon word of three letters or more, or begin with a prefix', () => {
    expect(reader.spells('kil')).toBe(true);
    expect(reader.spells('suicidaire')).toBe(true);
    expect(reader.spells('bombastic')).toBe(false);
    expect(reader.spells('us')).toBe(false);
    expect(reader.spells('my')).toBe(false);
  });
});
