import { Batcher } from './batcher';

/** A run whose batches the test settles by hand. */
function controlledRun() {
  const batches: Array<{
    inputs: readonly number[];
    settle: (outputs?: number[]) => void;
    fail: (e: Error) => void;
  }> = [];
  const run = (inputs: readonly number[]) =>
    new Promise<readonly number[]>((resolve, reject) => {
      batches.push({
        inputs,
        settle: (outputs) => resolve(outputs ?? inputs.map((input) => input * 10)),
        fail: reject,
      });
    });
  return { batches, run };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('Batcher', () => {
  it('runs a lone call at once, alone', async () => {
    const { batches, run } = controlledRun();
    const batcher = new Batcher(run, { maxBatch: 10, concurrency: 1 });
    const answer = batcher.submit(1);
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1]]);
    batches[0].settle();
    await expect(answer).resolves.toBe(10);
  });

  it('groups the calls that arrive while a batch is in flight, each answered with its own output', async () => {
    const { batches, run } = controlledRun();
    const batcher = new Batcher(run, { maxBatch: 10, concurrency: 1 });
    const answers = [1, 2, 3, 4].map((n) => batcher.submit(n));
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1]]);
    batches[0].settle();
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1], [2, 3, 4]]);
    batches[1].settle();
    await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30, 40]);
  });

  it('keeps batches within maxBatch and in-flight batches within concurrency', async () => {
    const { batches, run } = controlledRun();
    const batcher = new Batcher(run, { maxBatch: 2, concurrency: 2 });
    const answers = [1, 2, 3, 4, 5, 6, 7].map((n) => batcher.submit(n));
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1], [2]]);
    batches[0].settle();
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1], [2], [3, 4]]);
    batches[1].settle();
    batches[2].settle();
    await tick();
    expect(batches.map((b) => b.inputs)).toEqual([[1], [2], [3, 4], [5, 6], [7]]);
    batches[3].settle();
    batches[4].settle();
    await expect(Promise.all(answers)).resolves.toEqual([10, 20, 30, 40, 50, 60, 70]);
  });

  it('fails every call of a failed batch, and goes on with the next', async () => {
    const { batches, run } = controlledRun();
    const batcher = new Batcher(run, { maxBatch: 10, concurrency: 1 });
    const first = batcher.submit(1);
    const [second, third] = [2, 3].map((n) => batcher.submit(n));
    await tick();
    batches[0].settle();
    await tick();
    batches[1].fail(new Error('connection lost'));
    await expect(first).resolves.toBe(10);
    await expect(second).rejects.toThrow('connection lost');
    await expect(third).rejects.toThrow('connection lost');
    const fourth = batcher.submit(4);
    await tick();
    batches[2].settle();
    await expect(fourth).resolves.toBe(40);
  });

  it('fails the batch whose run answers the wrong number of outputs', async () => {
    const { batches, run } = controlledRun();
    const batcher = new Batcher(run, { maxBatch: 10, concurrency: 1 });
    const answer = batcher.submit(1);
    await tick();
    batches[0].settle([]);
    await expect(answer).rejects.toThrow('0 outputs for 1 inputs');
  });

  it('fails the batch whose run throws before returning a promise', async () => {
    const batcher = new Batcher<number, number>(
      () => {
        throw new Error('bad statement');
      },
      { maxBatch: 10, concurrency: 1 },
    );
    await expect(batcher.submit(1)).rejects.toThrow('bad statement');
    await expect(batcher.submit(2)).rejects.toThrow('bad statement');
  });
});
