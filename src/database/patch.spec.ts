import { patchedColumns } from './patch';

const squash = (text: string) => text.replace(/\s+/g, ' ');

describe('patchedColumns', () => {
  it('takes a given column from the insert and keeps the row’s other columns, null included', () => {
    const set = patchedColumns('s', { mode: 'off', message: null, burst: undefined });
    expect(squash(set.text)).toBe(
      'mode = CASE WHEN $1::boolean THEN excluded.mode ELSE s.mode END, ' +
        'message = CASE WHEN $2::boolean THEN excluded.message ELSE s.message END, ' +
        'burst = CASE WHEN $3::boolean THEN excluded.burst ELSE s.burst END',
    );
    // null is a value the PATCH sets (it clears); undefined is a column it leaves.
    expect(set.values).toEqual([true, true, false]);
  });

  it('has one text whatever the PATCH gives', () => {
    const none = patchedColumns('l', { a: undefined, b: undefined });
    const all = patchedColumns('l', { a: 1, b: 'x' });
    expect(all.text).toBe(none.text);
  });
});
