import type { PinoLogger } from 'nestjs-pino';
import { BackgroundJobs } from './background-jobs';

/** A logger that keeps what it was told. */
function recordingLogger() {
  const lines: Array<[string, unknown, string]> = [];
  const logger = {
    info: (fields: unknown, message: string) => lines.push(['info', fields, message]),
    error: (fields: unknown, message: string) => lines.push(['error', fields, message]),
  } as unknown as PinoLogger;
  return { logger, lines };
}

describe('PeriodicPurge', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('deletes in batches as of one time until a batch comes back short, and says how many', async () => {
    const jobs = new BackgroundJobs('server');
    const { logger, lines } = recordingLogger();
    const batches = [3, 3, 1];
    const asOf: Date[] = [];
    let reads = 0;
    const purge = jobs.purge({
      what: 'things past retention',
      intervalMs: 60_000,
      batchSize: 3,
      now: () => new Date(Date.UTC(2030, 0, 1, 0, 0, reads++)),
      deleteBatch: (now, batchSize) => {
        expect(batchSize).toBe(3);
        asOf.push(now);
        return Promise.resolve(batches.shift() ?? 0);
      },
      logger,
    });
    expect(await purge.runNow()).toBe(7);
    expect(asOf).toHaveLength(3);
    expect(new Set(asOf.map((at) => at.getTime())).size).toBe(1);

    // Scheduled: 10 s after start (the interval being longer), logged only when it deleted.
    batches.push(2);
    jobs.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(10_000);
    expect(lines).toEqual([['info', { count: 2 }, 'purged things past retention']]);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(lines).toHaveLength(1);
    await jobs.onModuleDestroy();
  });

  it('logs a failed run and keeps its schedule', async () => {
    const jobs = new BackgroundJobs('server');
    const { logger, lines } = recordingLogger();
    const failure = new Error('database gone');
    let calls = 0;
    jobs.purge({
      what: 'things',
      intervalMs: 5_000,
      batchSize: 10,
      now: () => new Date(),
      deleteBatch: () => (++calls === 1 ? Promise.reject(failure) : Promise.resolve(4)),
      logger,
    });
    jobs.onApplicationBootstrap();
    await jest.advanceTimersByTimeAsync(5_000);
    await jest.advanceTimersByTimeAsync(5_000);
    expect(lines).toEqual([
      ['error', { err: failure }, 'purging things failed'],
      ['info', { count: 4 }, 'purged things'],
    ]);
    await jobs.onModuleDestroy();
  });
});
