import { InvalidVectorError, isUnembeddable, MAX_DIMENSIONS, unitLength } from './embedder';

describe('unitLength (a provider vector as the service stores it)', () => {
  it('scales to unit length', () => {
    expect(unitLength([3, 4])).toEqual([0.6, 0.8]);
  });

  it("gives 0 for a component too small for PostgreSQL's real, which would refuse the statement", () => {
    const [large, tiny] = unitLength([1, 1e-46]);
    expect(large).toBe(1);
    expect(tiny).toBe(0);
  });

  it('scales very large and very small vectors without overflow or underflow', () => {
    expect(unitLength([1e200, -1e200])[0]).toBeCloseTo(Math.SQRT1_2, 12);
    expect(unitLength([3e-200, 4e-200])).toEqual([0.6, 0.8]);
  });

  it('is unembeddable, as a refused text is: its item is skipped alone', () => {
    let thrown: unknown;
    try {
      unitLength([0, 0]);
    } catch (error) {
      thrown = error;
    }
    expect(thrown).toBeInstanceOf(InvalidVectorError);
    expect(isUnembeddable(thrown)).toBe(true);
  });

  it.each([
    ['not finite', [1, Number.NaN]],
    ['infinite', [Number.POSITIVE_INFINITY, 1]],
    ['empty', []],
    ['longer than MAX_DIMENSIONS', new Array<number>(MAX_DIMENSIONS + 1).fill(1)],
    ['not numbers', ['1', 2]],
    ['not an array', 'base64text'],
    ['all zeros', [0, 0, 0]],
  ])('refuses a vector that is %s', (_, vector) => {
    expect(() => unitLength(vector)).toThrow(InvalidVectorError);
  });

  it('takes MAX_DIMENSIONS', () => {
    expect(unitLength(new Array<number>(MAX_DIMENSIONS).fill(1))).toHaveLength(MAX_DIMENSIONS);
  });
});
