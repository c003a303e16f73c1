import { questionSketch } from './fusion';

/** The asymmetric estimate sketchShortlist orders by, from the planes, as its SQL counts it. */
function estimate(vector: readonly number[], signs: readonly boolean[]): number {
  const { planes } = questionSketch(vector);
  const shared = (plane: string) => signs.filter((set, i) => set && plane[i] === '1').length;
  const set = signs.filter(Boolean).length;
  return (
    2 *
      (shared(planes[0]) + 2 * shared(planes[1]) + 4 * shared(planes[2]) + 8 * shared(planes[3])) -
    15 * set
  );
}

/** A deterministic generator (xorshift), so a failure can be run again. */
function generator(seed: number): () => number {
  let state = seed;
  return () => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) / 2 ** 32;
  };
}

describe('questionSketch', () => {
  it("signs: '1' where a component is positive, as embedding_sketch sets them", () => {
    expect(questionSketch([0.5, -0.5, 0, 1e-9, -1e-9]).signs).toBe('10010');
  });

  it('planes: each component on 16 levels from -max|q| to +max|q|, lowest bit first', () => {
    // Levels 15, 0, 8 (0.1 of the largest: 8.25) and 7 (-0.1: 6.75).
    expect(questionSketch([2, -2, 0.2, -0.2]).planes).toEqual(['1001', '1001', '1001', '1010']);
  });

  it('the estimate is the sum of the components where the sign is set, within a level each', () => {
    const next = generator(20261207);
    for (let round = 0; round < 50; round += 1) {
      const vector = Array.from({ length: 64 }, () => next() * 2 - 1);
      const signs = Array.from({ length: 64 }, () => next() < 0.5);
      const largest = Math.max(...vector.map(Math.abs));
      const exact = vector.reduce((sum, x, i) => (signs[i] ? sum + x : sum), 0);
      const set = signs.filter(Boolean).length;
      // One level is 2 / 15 of the largest component; a component is off by half a level at most.
      expect(Math.abs((estimate(vector, signs) * largest) / 15 - exact)).toBeLessThanOrEqual(
        (set * largest) / 15 + 1e-9,
      );
    }
  });

  it('weighs each sign by the component, where the Hamming distance counts them alike', () => {
    const question = [0.9, 0.2, 0.2, 0.2, 0.2, 0.1, 0.1, 0.1];
    // One sign off from the question's, but the largest: its cosine with the question is 0.2.
    const near = [false, true, true, true, true, true, true, true];
    // Three off, all small: 0.8.
    const far = [true, false, false, false, true, true, true, true];
    expect(estimate(question, far)).toBeGreaterThan(estimate(question, near));
  });
});
