import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { FinalEventWatcher, type StreamOutcome } from './final-event';

async function watch(chunks: string[]): Promise<{ outcomes: StreamOutcome[]; passed: string }> {
  const outcomes: StreamOutcome[] = [];
  const watcher = new FinalEventWatcher(async (outcome) => {
    outcomes.push(outcome);
  });
  let passed = '';
  watcher.on('data', (chunk: Buffer) => (passed += chunk.toString()));
  await pipeline(Readable.from(chunks), watcher);
  return { outcomes, passed };
}

describe('FinalEventWatcher', () => {
  const done = 'event: done\ndata: {"reply":{"text":"hi"}}\n\n';

  it('reports the done event once and passes every byte through', async () => {
    const chunks = [': ok\n\n', 'event: delta\ndata: {"text":"hi"}\n\n', done];
    const { outcomes, passed } = await watch(chunks);
    expect(outcomes).toEqual([{ kind: 'done', data: '{"reply":{"text":"hi"}}' }]);
    expect(passed).toBe(chunks.join(''));
  });

  it('finds an event split across chunks', async () => {
    const { outcomes } = await watch(['event: do', 'ne\ndata: {"a":', '1}\n', '\n']);
    expect(outcomes).toEqual([{ kind: 'done', data: '{"a":1}' }]);
  });

  it('reports nothing to store for an error event or a stream that ends without done', async () => {
    expect((await watch(['event: error\ndata: {"error":{}}\n\n', done])).outcomes).toEqual([
      { kind: 'none' },
    ]);
    expect((await watch(['event: delta\ndata: {}\n\n'])).outcomes).toEqual([{ kind: 'none' }]);
  });

  it('holds the chunk that completes done until the outcome is stored', async () => {
    const order: string[] = [];
    const watcher = new FinalEventWatcher(async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      order.push('stored');
    });
    watcher.on('data', () => order.push('sent'));
    await pipeline(Readable.from([done]), watcher);
    expect(order).toEqual(['stored', 'sent']);
  });

  it('reports none once when destroyed before done (the client left)', async () => {
    const outcomes: StreamOutcome[] = [];
    const watcher = new FinalEventWatcher(async (outcome) => {
      outcomes.push(outcome);
    });
    watcher.write('event: delta\ndata: {}\n\n');
    watcher.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(outcomes).toEqual([{ kind: 'none' }]);
  });
});
