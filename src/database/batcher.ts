/**
 * Group commit for small statements that many requests make at once: the first call runs at
 * once, calls arriving while `concurrency` batches are in flight wait and go together as the
 * next batch (at most `maxBatch`). One statement for many rows costs PostgreSQL one parse, one
 * plan and one commit instead of one each, and no call waits for a timer: under light load every
 * batch is a single call.
 */
export class Batcher<In, Out> {
  private readonly waiting: Array<{
    input: In;
    resolve: (output: Out) => void;
    reject: (error: unknown) => void;
  }> = [];
  private inFlight = 0;

  /** `run` answers one output per input, in the inputs' order. */
  constructor(
    private readonly run: (inputs: readonly In[]) => Promise<readonly Out[]>,
    private readonly options: { maxBatch: number; concurrency: number },
  ) {}

  submit(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.waiting.push({ input, resolve, reject });
      this.next();
    });
  }

  private next(): void {
    if (this.inFlight >= this.options.concurrency || this.waiting.length === 0) return;
    const batch = this.waiting.splice(0, this.options.maxBatch);
    this.inFlight += 1;
    // A run that throws synchronously fails its batch like one that rejects.
    Promise.resolve()
      .then(() => this.run(batch.map((call) => call.input)))
      .then((outputs) => {
        if (outputs.length !== batch.length) {
          throw new Error(`Batcher: ${outputs.length} outputs for ${batch.length} inputs`);
        }
        batch.forEach((call, index) => call.resolve(outputs[index]));
      })
      .catch((error: unknown) => batch.forEach((call) => call.reject(error)))
      .finally(() => {
        this.inFlight -= 1;
        this.next();
      });
  }
}
