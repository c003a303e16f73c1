import { validate } from 'class-validator';
import { userIdProblem } from '../../end-users/dto/user-id';
import { CONTROL_CHARACTER, NoControlCharacters } from './no-control-characters';

class Named {
  @NoControlCharacters()
  name: string;
}

const named = (name: string) => Object.assign(new Named(), { name });

describe('NoControlCharacters', () => {
  it.each([
    ['a NUL', 'a\u0000b'],
    ['a line feed', 'a\nb'],
    ['a C1 control', 'a\u0085b'],
    ['a right-to-left override', 'admin\u202egro.evil'],
    ['a left-to-right embedding', '\u202aname'],
    ['a first-strong isolate', 'a\u2068b\u2069'],
  ])('refuses %s, in names and in user ids', async (_, value) => {
    expect(CONTROL_CHARACTER.test(value)).toBe(true);
    expect(await validate(named(value))).toHaveLength(1);
    expect(userIdProblem(value)).toBe('must not contain control characters');
  });

  it.each([
    ['Latin', 'Ada Lovelace'],
    ['Hebrew with a right-to-left mark', 'שלום\u200f 2'],
    ['Arabic', 'مرحبا'],
    ['an emoji with joiners', '👩‍👩‍👧 family'],
  ])('takes %s', async (_, value) => {
    expect(await validate(named(value))).toEqual([]);
    expect(userIdProblem(value)).toBeNull();
  });
});
