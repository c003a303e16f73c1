import { foldsIntoAscii } from './no-ascii-lookalikes';

describe('foldsIntoAscii', () => {
  it.each([
    ['kate@corp.com', false],
    ['KATE@CORP.COM', false],
    ['éva@example.test', false],
    ['ÉVA@EXAMPLE.TEST', false],
    ['\u212Aate@corp.com', true],
    ['kate@\u212Apmg.com', true],
    ['\u0130nci@example.test', true],
    ['\u212Bngstr\u00f6m@example.test', false],
  ])('%j: %s', (address, expected) => {
    expect(foldsIntoAscii(address)).toBe(expected);
  });
});
