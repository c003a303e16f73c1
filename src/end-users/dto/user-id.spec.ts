import { metadataProblem, newUserIdProblem, userIdProblem } from './user-id';

describe('userIdProblem', () => {
  it('accepts 1..256 characters counted as code points, without control characters', () => {
    expect(userIdProblem('a')).toBeNull();
    expect(userIdProblem('x'.repeat(256))).toBeNull();
    expect(userIdProblem('😀'.repeat(256))).toBeNull(); // 512 UTF-16 units, 256 characters
    expect(userIdProblem('user with spaces/and/slashes')).toBeNull();
  });

  it('names the problem otherwise', () => {
    expect(userIdProblem('')).toBe('must not be empty');
    expect(userIdProblem('x'.repeat(257))).toBe('must be at most 256 characters');
    expect(userIdProblem('a\nb')).toBe('must not contain control characters');
    expect(userIdProblem('a\u0085b')).toBe('must not contain control characters');
    expect(userIdProblem(7)).toBe('must be a string');
  });
});

describe('newUserIdProblem', () => {
  it("refuses '.' and '..', which a URL path drops, for a new end user; names them still (review)", () => {
    for (const dots of ['.', '..']) {
      expect(newUserIdProblem(dots)).toBe("must not be '.' or '..' (a URL path drops them)");
      expect(userIdProblem(dots)).toBeNull();
    }
    for (const fine of ['...', '.a', 'a.', './x', '%2E']) expect(newUserIdProblem(fine)).toBeNull();
    expect(newUserIdProblem('')).toBe('must not be empty');
  });
});

describe('metadataProblem', () => {
  it('accepts JSON objects up to 16 KiB serialized, in bytes', () => {
    expect(metadataProblem({})).toBeNull();
    expect(metadataProblem({ v: 'x'.repeat(16 * 1024 - 8) })).toBeNull();
    expect(metadataProblem({ v: 'x'.repeat(16 * 1024 - 7) })).toMatch(/at most 16384 bytes/);
    // 'é' is two bytes in UTF-8.
    expect(metadataProblem({ v: 'é'.repeat(8 * 1024) })).toMatch(/at most/);
  });

  it('nests 63 levels at most, as a request body of 64 carries it (an import held 70: review)', () => {
    const nested = (levels: number) => {
      let value: Record<string, unknown> = {};
      for (let i = 1; i < levels; i++) value = { a: value };
      return value;
    };
    expect(metadataProblem(nested(63))).toBeNull();
    expect(metadataProblem({ list: [[[]]] })).toBeNull();
    expect(metadataProblem(nested(64))).toBe('must not nest deeper than 63 levels');
    expect(metadataProblem({ a: nested(63) })).toBe('must not nest deeper than 63 levels');
  });

  it('refuses a number JSON cannot write, which was stored as null (review)', () => {
    expect(metadataProblem({ big: 1.7e308, list: [-0, 2 ** 53 + 1] })).toBeNull();
    expect(metadataProblem(JSON.parse('{"a":{"b":[1,1e309]}}') as object)).toBe(
      'must not hold a number JSON cannot write (too large for a double, at a.b.1)',
    );
    // The place is echoed in the answer: a hostile key is cut, as field names are.
    const long = metadataProblem({ ['k'.repeat(10_000)]: JSON.parse('1e309') as number });
    expect(long?.length).toBeLessThan(300);
  });

  it('refuses arrays, null and scalars', () => {
    for (const value of [[], null, 'text', 1, true]) {
      expect(metadataProblem(value)).toBe('must be a JSON object');
    }
  });
});
