import { monthOf } from './usage.dto';

describe('monthOf', () => {
  it('answers the UTC calendar month, whatever the local offset of the instant', () => {
    expect(monthOf(new Date('2026-11-30T23:59:59.999Z'))).toBe('2026-11');
    expect(monthOf(new Date('2026-12-01T00:00:00.000Z'))).toBe('2026-12');
    // 1 December 08:00 in UTC+14 is still 30 November in UTC.
    expect(monthOf(new Date('2026-12-01T08:00:00+14:00'))).toBe('2026-11');
    expect(monthOf(new Date('2027-01-01T00:00:00-01:00'))).toBe('2027-01');
  });
});
