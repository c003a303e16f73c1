import type { LookupAddress } from 'node:dns';
import { LookupSlots } from './lookup-slots';

/** A resolver whose answers the test gives by hand, one per lookup, in the order asked. */
function handResolver() {
  const pending: Array<{ host: string; answer: (addresses: LookupAddress[]) => void }> = [];
  const resolve = jest.fn(
    (host: string) =>
      new Promise<LookupAddress[]>((answer) => {
        pending.push({ host, answer });
      }),
  );
  const answerNext = () => pending.shift()?.answer([{ address: '93.184.215.14', family: 4 }]);
  return { resolve, pending, answerNext };
}

const asked = (resolver: ReturnType<typeof handResolver>) => resolver.pending.map((p) => p.host);
const settled = () => new Promise((resolve) => setImmediate(resolve));

describe('LookupSlots', () => {
  it('runs at most its capacity of lookups, the rest in order as slots free', async () => {
    const resolver = handResolver();
    const slots = new LookupSlots(2, 2, resolver.resolve);
    const answers = ['a', 'b', 'c'].map((host) => slots.resolve(host, 'org-1', 5_000));
    expect(asked(resolver)).toEqual(['a', 'b']);

    resolver.answerNext();
    await expect(answers[0]).resolves.toEqual([{ address: '93.184.215.14', family: 4 }]);
    expect(asked(resolver)).toEqual(['b', 'c']);
    resolver.answerNext();
    resolver.answerNext();
    await Promise.all(answers);
  });

  it('lets one organization hold only its share, so another is served beside it', async () => {
    const resolver = handResolver();
    const slots = new LookupSlots(2, 1, resolver.resolve);
    const stuck = slots.resolve('black-hole-1.example', 'hostile', 5_000);
    const second = slots.resolve('black-hole-2.example', 'hostile', 5_000);
    const other = slots.resolve('example.com', 'other', 5_000);
    expect(asked(resolver)).toEqual(['black-hole-1.example', 'example.com']);

    resolver.pending.splice(1, 1)[0].answer([]);
    await expect(other).resolves.toEqual([]);
    // The free slot stays free: the hostile organization's second lookup waits for its first.
    expect(asked(resolver)).toEqual(['black-hole-1.example']);
    resolver.answerNext();
    await stuck;
    expect(asked(resolver)).toEqual(['black-hole-2.example']);
    resolver.answerNext();
    await second;
  });

  it("gives up on a caller's deadline, but keeps the slot until the resolver returns", async () => {
    const resolver = handResolver();
    const slots = new LookupSlots(1, 1, resolver.resolve);
    const slow = slots.resolve('slow.example', 'org-1', 20);
    const queued = slots.resolve('queued.example', 'org-2', 5_000);
    await expect(slow).rejects.toMatchObject({
      code: 'ETIMEOUT',
      message: 'looking up slow.example took over 20 ms',
    });
    // The thread is still taken by the first lookup: the next one has not started.
    expect(asked(resolver)).toEqual(['slow.example']);
    resolver.answerNext();
    await settled();
    expect(asked(resolver)).toEqual(['queued.example']);
    resolver.answerNext();
    await expect(queued).resolves.toHaveLength(1);
  });

  it('drops a queued caller at its deadline: its lookup never runs', async () => {
    const resolver = handResolver();
    const slots = new LookupSlots(1, 1, resolver.resolve);
    const first = slots.resolve('first.example', 'org-1', 5_000);
    const abandoned = slots.resolve('abandoned.example', 'org-2', 20);
    await expect(abandoned).rejects.toMatchObject({ code: 'ETIMEOUT' });
    resolver.answerNext();
    await first;
    await settled();
    expect(resolver.resolve.mock.calls.map(([host]) => host)).toEqual(['first.example']);
  });

  it("passes the resolver's own error on and frees the slot", async () => {
    const failure = Object.assign(new Error('getaddrinfo ENOTFOUND missing.example'), {
      code: 'ENOTFOUND',
    });
    const resolve = jest
      .fn<Promise<LookupAddress[]>, [string]>()
      .mockRejectedValueOnce(failure)
      .mockResolvedValueOnce([]);
    const slots = new LookupSlots(1, 1, resolve);
    await expect(slots.resolve('missing.example', 'org-1', 5_000)).rejects.toBe(failure);
    await expect(slots.resolve('example.com', 'org-1', 5_000)).resolves.toEqual([]);
  });
});
