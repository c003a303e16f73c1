import { inBatches, PeriodicTask } from './periodic-task';

describe('PeriodicTask', () => {
  beforeEach(() => jest.useFakeTimers());
  afterEach(() => jest.useRealTimers());

  it('runs after the first delay, then every interval after the previous run ends', async () => {
    const starts: number[] = [];
    const task = new PeriodicTask({
      firstDelayMs: 10,
      intervalMs: 100,
      run: async () => {
        starts.push(Date.now());
        await new Promise((resolve) => setTimeout(resolve, 50));
      },
      onError: () => undefined,
    });
    const t0 = Date.now();
    task.start();
    await jest.advanceTimersByTimeAsync(400);
    expect(starts.map((at) => at - t0)).toEqual([10, 160, 310]);
    await task.stop();
  });

  it('reports a failed run and keeps its schedule', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const task = new PeriodicTask({
      intervalMs: 10,
      run: () => Promise.reject(new Error(`run ${++runs}`)),
      onError: (error) => errors.push(error),
    });
    task.start();
    await jest.advanceTimersByTimeAsync(35);
    expect(errors.map((e) => (e as Error).message)).toEqual(['run 1', 'run 2', 'run 3']);
    await task.stop();
  });

  it('while the database is out of reach, reports it once a minute and waits longer between runs', async () => {
    const errors: unknown[] = [];
    const starts: number[] = [];
    let reachable = false;
    const task = new PeriodicTask({
      intervalMs: 500,
      run: () => {
        starts.push(Date.now());
        return reachable
          ? Promise.resolve()
          : Promise.reject(new Error('Connection terminated unexpectedly'));
      },
      onError: (error) => errors.push(error),
    });
    const t0 = Date.now();
    task.start();
    await jest.advanceTimersByTimeAsync(59_000);
    // Waits of 1, 2, 4, 8 and 16 s, then 30 s: not 118 runs, and one report, not 118.
    expect(starts.map((at) => at - t0)).toEqual([500, 1_500, 3_500, 7_500, 15_500, 31_500]);
    expect(errors).toHaveLength(1);
    await jest.advanceTimersByTimeAsync(60_000);
    expect(errors).toHaveLength(2);
    // Back: a run every interval again.
    reachable = true;
    const before = starts.length;
    await jest.advanceTimersByTimeAsync(30_000 + 2_000);
    expect(starts.length - before).toBeGreaterThanOrEqual(4);
    await task.stop();
  });

  it('waits for the run in progress at stop and schedules none after it', async () => {
    let finished = false;
    let runs = 0;
    const task = new PeriodicTask({
      intervalMs: 10,
      run: async () => {
        runs++;
        await new Promise((resolve) => setTimeout(resolve, 30));
        finished = true;
      },
      onError: () => undefined,
    });
    task.start();
    await jest.advanceTimersByTimeAsync(15);
    const stopped = task.stop();
    expect(task.isStopped).toBe(true);
    await jest.advanceTimersByTimeAsync(100);
    await stopped;
    expect(finished).toBe(true);
    expect(runs).toBe(1);
  });

  it('runs exclusive work after the run in progress and never beside the next', async () => {
    const log: string[] = [];
    const task = new PeriodicTask({
      firstDelayMs: 0,
      intervalMs: 10,
      run: async () => {
        log.push('run start');
        await new Promise((resolve) => setTimeout(resolve, 30));
        log.push('run end');
      },
      onError: () => undefined,
    });
    task.start();
    await jest.advanceTimersByTimeAsync(5);
    const now = task.exclusive(async () => {
      log.push('now start');
      await new Promise((resolve) => setTimeout(resolve, 30));
      log.push('now end');
      return 7;
    });
    await jest.advanceTimersByTimeAsync(100);
    await expect(now).resolves.toBe(7);
    expect(log.slice(0, 6)).toEqual([
      'run start',
      'run end',
      'now start',
      'now end',
      'run start',
      'run end',
    ]);
    const stopped = task.stop();
    await jest.advanceTimersByTimeAsync(100);
    await stopped;
  });
});

describe('inBatches', () => {
  it('repeats full batches, stops at a short one, and answers the total', async () => {
    const sizes = [3, 3, 1, 3];
    const total = await inBatches(
      3,
      () => Promise.resolve(sizes.shift() ?? 0),
      () => false,
    );
    expect(total).toBe(7);
    expect(sizes).toEqual([3]);
  });

  it('stops after the current batch when asked', async () => {
    let calls = 0;
    const total = await inBatches(
      3,
      () => Promise.resolve(++calls && 3),
      () => calls === 2,
    );
    expect(total).toBe(6);
  });
});
