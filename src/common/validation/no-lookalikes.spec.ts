import { standsForAnother } from './no-lookalikes';

describe('standsForAnother', () => {
  it.each([
    ['kate@corp.com', false],
    ['KATE@CORP.COM', false],
    ['éva@example.test', false],
    ['ÉVA@EXAMPLE.TEST', false],
    ['\u00c5ngstr\u00f6m@example.test', false],
    ['\u00e5sa@corp.test', false],
    ['\u03c9mega@corp.test', false],
    ['\u212Aate@corp.com', true],
    ['kate@\u212Apmg.com', true],
    ['\u0130nci@example.test', true],
    // Compatibility characters: ANGSTROM SIGN, OHM SIGN, a fullwidth letter.
    ['\u212Bngstr\u00f6m@example.test', true],
    ['\u212Bsa@corp.test', true],
    ['\u2126mega@corp.test', true],
    ['\uff4bate@corp.com', true],
    // é as e and a combining acute: lower() keeps the two spellings apart.
    ['e\u0301va@example.test', true],
  ])('%j: %s', (address, expected) => {
    expect(standsForAnother(address)).toBe(expected);
  });
});
