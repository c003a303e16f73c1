import { quotationsOf, quoteOf } from './memory-quote';

describe('how a reply quotes a memory', () => {
  it('folds white space and shortens past 80 characters with an ellipsis', () => {
    expect(quoteOf('  my  cat\nis   Tom ')).toBe('my cat is Tom');
    const long = 'word '.repeat(30);
    expect(quoteOf(long)).toHaveLength(80);
    expect(quoteOf(long).endsWith('word…')).toBe(true);
  });

  it('gives what a reply repeating the message holds, in any quotation marks: the quote, and the whole message', () => {
    expect(quotationsOf('my  cat is Tom')).toEqual(['my cat is Tom']);
    const long = 'word '.repeat(30);
    expect(quotationsOf(long)).toEqual([quoteOf(long), long.trim()]);
  });

  it('looks for none of a message too short to tell a quote of it from a coincidence', () => {
    expect(quotationsOf('ok')).toEqual([]);
    expect(quotationsOf('   London   ')).toEqual([]);
    expect(quotationsOf('!!!!!!!!!!!!!!!!')).toEqual([]);
    expect(quotationsOf('I live in Oslo')).toEqual(['I live in Oslo']);
  });
});
