import { DatabaseOutage, OUTAGE_MAX_DELAY_MS, OUTAGE_REPORT_EVERY_MS } from './database-outage';

describe('DatabaseOutage', () => {
  const lost = () => new Error('Connection terminated unexpectedly');

  it('reports the first failure of an outage, then one a minute, and spaces the runs out', () => {
    let now = 0;
    const outage = new DatabaseOutage(() => now);
    expect(outage.delayMs(500)).toBe(500);
    const reported: boolean[] = [];
    const delays: number[] = [];
    for (let run = 0; run < 8; run += 1) {
      reported.push(outage.failed(lost()));
      delays.push(outage.delayMs(500));
      now += delays.at(-1)!;
    }
    expect(reported).toEqual([true, false, false, false, false, false, true, false]);
    expect(delays).toEqual([1_000, 2_000, 4_000, 8_000, 16_000, 30_000, 30_000, 30_000]);
    expect(now).toBeGreaterThanOrEqual(OUTAGE_REPORT_EVERY_MS);
    // Back: the loop's own interval, and a new outage is reported at once.
    outage.succeeded();
    expect(outage.delayMs(500)).toBe(500);
    expect(outage.failed(lost())).toBe(true);
  });

  it('keeps spacing the runs out when other failures come between', () => {
    const outage = new DatabaseOutage(() => 0);
    outage.failed(lost());
    outage.failed(lost());
    expect(outage.failed(new Error('cannot execute INSERT in a read-only transaction'))).toBe(true);
    expect(outage.delayMs(500)).toBe(2_000);
  });

  it('reports every other failure, and never waits less than a loop whose interval is longer', () => {
    const outage = new DatabaseOutage(() => 0);
    expect(outage.failed(new Error('a bug'))).toBe(true);
    expect(outage.failed(new Error('another'))).toBe(true);
    expect(outage.delayMs(500)).toBe(500);
    outage.failed(lost());
    expect(outage.delayMs(60 * OUTAGE_MAX_DELAY_MS)).toBe(60 * OUTAGE_MAX_DELAY_MS);
  });
});
