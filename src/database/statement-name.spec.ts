import { statementName } from './statement-name';

describe('statementName', () => {
  it('gives the same text the same name', () => {
    const text = 'SELECT * FROM end_users WHERE id = $1';
    expect(statementName(text)).toBe(statementName(`SELECT * FROM end_users WHERE id = ${'$1'}`));
  });

  it('gives different texts different names', () => {
    expect(statementName('SELECT 1')).not.toBe(statementName('SELECT 2'));
    expect(statementName('SELECT 1')).not.toBe(statementName('SELECT 1 '));
  });

  it('stays within PostgreSQL’s 63-byte identifier limit, however long the text', () => {
    const name = statementName(`SELECT ${'x, '.repeat(10_000)}1`);
    expect(Buffer.byteLength(name)).toBeLessThanOrEqual(63);
    expect(name).toMatch(/^[a-z_][a-z0-9_]*$/);
  });
});
