import { MAX_DIMENSIONS, unitLength } from './embedder';

describe('unitLength (a provider vector as the service stores it)', () => {
  it('scales to unit length', () => {
    expect(unitLength([3, 4])).toEqual([0.6, 0.8]);
  });

  it("gives 0 for a component too small for PostgreSQL's real, which would refuse the statement", () => {
    const [large, tiny] = unitLength([1, 1e-46]);
    expect(large).toBe(1);
    expect(tiny).toBe(0);
  });

  it('keeps an all-zero vector as it is', () => {
    expect(unitLength([0, 0, 0])).toEqual([0, 0, 0]);
  });

  it.each([
    ['not finite', [1, Number.NaN]],
    ['infinite', [Number.POSITIVE_INFINITY, 1]],
    ['empty', []],
    ['longer than MAX_DIMENSIONS', new Array<number>(MAX_DIMENSIONS + 1).fill(1)],
    ['not numbers', ['1', 2]],
    ['not an array', 'base64text'],
  ])('refuses a vector that is %s', (_, vector) => {
    expect(() => unitLength(vector)).toThrow(/Embedder: the provider answered a vector/);
  });

  it('takes MAX_DIMENSIONS', () => {
    expect(unitLength(new Array<number>(MAX_DIMENSIONS).fill(1))).toHaveLength(MAX_DIMENSIONS);
  });
});
