import { inTurns } from './embedding.worker';

describe('inTurns: a batch drawn from organizations in rounds', () => {
  const line = (turn: number, count: number) =>
    Array.from({ length: count }, (_, i) => ({ turn, id: `${turn}-${i}` }));

  it("takes each organization's first item, then each one's second, up to the limit", () => {
    const drawn = [...line(1, 5), ...line(2, 1), ...line(3, 2)];
    expect(inTurns(drawn, 6).map((item) => item.id)).toEqual([
      '1-0',
      '2-0',
      '3-0',
      '1-1',
      '3-1',
      '1-2',
    ]);
  });

  it('fills the batch from the lines that are left when the others run out', () => {
    const drawn = [...line(1, 10), ...line(2, 1)];
    expect(inTurns(drawn, 8).map((item) => item.id)).toEqual([
      '1-0',
      '2-0',
      '1-1',
      '1-2',
      '1-3',
      '1-4',
      '1-5',
      '1-6',
    ]);
  });

  it('answers every item when they are fewer than the limit, and none of none', () => {
    expect(inTurns([...line(1, 2), ...line(2, 2)], 64)).toHaveLength(4);
    expect(inTurns([], 64)).toEqual([]);
  });
});
