import { nextUtcDay, secondsToNextUtcDay, utcDay } from './utc-day';

describe('UTC days', () => {
  it('names the UTC day, whatever the time of day', () => {
    expect(utcDay(new Date('2031-05-20T23:59:59.999Z'))).toBe('2031-05-20');
    expect(utcDay(new Date('2031-05-21T00:00:00.000Z'))).toBe('2031-05-21');
  });

  it('names the next midnight, across a month and a year', () => {
    expect(nextUtcDay(new Date('2031-01-31T12:00:00Z')).toISOString()).toBe(
      '2031-02-01T00:00:00.000Z',
    );
    expect(nextUtcDay(new Date('2031-12-31T23:59:59Z')).toISOString()).toBe(
      '2032-01-01T00:00:00.000Z',
    );
  });

  it('counts the seconds to the next midnight, rounded up and never 0', () => {
    expect(secondsToNextUtcDay(Date.parse('2031-05-20T23:59:58.500Z'))).toBe(2);
    expect(secondsToNextUtcDay(Date.parse('2031-05-20T00:00:00.000Z'))).toBe(86_400);
    expect(secondsToNextUtcDay(Date.parse('2031-12-31T23:59:59.999Z'))).toBe(1);
  });
});
