import { KeyedLine } from './keyed-line';

const settle = () => new Promise((resolve) => setImmediate(resolve));

/** Work that runs until the test ends it. */
function held() {
  let end!: () => void;
  const ended = new Promise<void>((resolve) => (end = resolve));
  const work = { started: false, end, run: async () => ((work.started = true), await ended) };
  return work;
}

describe('KeyedLine', () => {
  it("runs one key's work one at a time, in order; another key's at once", async () => {
    const line = new KeyedLine();
    const [first, second, other] = [held(), held(), held()];
    const runs = [line.run('a', first.run), line.run('a', second.run), line.run('b', other.run)];
    await settle();
    expect([first.started, second.started, other.started]).toEqual([true, false, true]);
    expect([line.size('a'), line.size('b')]).toEqual([2, 1]);
    first.end();
    await settle();
    expect(second.started).toBe(true);
    second.end();
    other.end();
    await Promise.all(runs);
    expect([line.size('a'), line.size('b')]).toEqual([0, 0]);
  });

  it('lets work whose signal aborts leave before its turn; the next still waits for the first', async () => {
    const line = new KeyedLine();
    const [first, gone, third] = [held(), held(), held()];
    const controller = new AbortController();
    const running = line.run('a', first.run);
    const left = line.run('a', gone.run, controller.signal).catch((error: unknown) => error);
    const waiting = line.run('a', third.run);
    controller.abort(new Error('client gone'));
    expect(await left).toEqual(new Error('client gone'));
    await settle();
    expect([gone.started, third.started]).toEqual([false, false]);
    first.end();
    await running;
    await settle();
    expect(third.started).toBe(true);
    third.end();
    await waiting;
  });

  it('goes on after work that failed', async () => {
    const line = new KeyedLine();
    await expect(line.run('a', () => Promise.reject(new Error('failed')))).rejects.toThrow(
      'failed',
    );
    await expect(line.run('a', () => Promise.resolve('next'))).resolves.toBe('next');
  });
});
