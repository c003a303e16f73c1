type Answer = (host: string) => Promise<string[]>;
const answers: { resolve4: jest.Mock<Promise<string[]>, [string]>; resolve6: jest.Mock } = {
  resolve4: jest.fn<Promise<string[]>, [string]>(),
  resolve6: jest.fn<Promise<string[]>, [string]>(),
};
const mockSystemLookup = jest.fn();
jest.mock('node:dns/promises', () => ({
  ...jest.requireActual('node:dns/promises'),
  Resolver: class {
    resolve4 = (host: string) => answers.resolve4(host);
    resolve6 = (host: string) => answers.resolve6(host);
  },
}));
jest.mock('node:dns', () => ({ ...jest.requireActual('node:dns'), lookup: mockSystemLookup }));

import { assertPublicHost, guardedLookup, UnsafeAddressError } from './ssrf-guard';

const failing =
  (code: string): Answer =>
  (host) =>
    Promise.reject(Object.assign(new Error(`query ${code} ${host}`), { code }));
const answering =
  (...addresses: string[]): Answer =>
  () =>
    Promise.resolve(addresses);

/** The SSRF guard's answer to what the resolver (c-ares, faked here) says. */
describe('SSRF guard: what the resolver says', () => {
  const check = (timeoutMs = 1_000) =>
    assertPublicHost(new URL('https://example.com/hook'), timeoutMs);
  const answer = (v4: Answer, v6: Answer) => {
    answers.resolve4.mockImplementation(v4);
    answers.resolve6.mockImplementation(v6);
  };
  afterEach(() => expect(mockSystemLookup).not.toHaveBeenCalled());

  it('refuses a name that does not exist in the same words as an internal one', async () => {
    for (const code of ['ENOTFOUND', 'ENODATA', 'EBADNAME']) {
      answer(failing(code), failing('ENODATA'));
      await expect(check()).rejects.toThrow(new UnsafeAddressError('example.com').message);
    }
  });

  it('passes on a resolver that could not answer, even for one family: the name may be fine', async () => {
    for (const code of ['ETIMEOUT', 'ESERVFAIL', 'ECONNREFUSED']) {
      answer(failing(code), failing('ENODATA'));
      const refusal = await check().catch((error: unknown) => error);
      expect(refusal).not.toBeInstanceOf(UnsafeAddressError);
      expect(refusal).toMatchObject({ code });
    }
    // One family unanswered beside the other's answer: the answer alone is used.
    answer(answering('93.184.215.14'), failing('ETIMEOUT'));
    await expect(check()).resolves.toBeUndefined();
    answer(failing('ENODATA'), failing('ESERVFAIL'));
    await expect(check()).rejects.toMatchObject({ code: 'ESERVFAIL' });
  });

  it('accepts a name whose every address is public, refuses one with a private answer', async () => {
    answer(answering('93.184.215.14'), failing('ENODATA'));
    await expect(check()).resolves.toBeUndefined();
    answer(answering('93.184.215.14'), answering('2606:4700:4700::1111'));
    await expect(check()).resolves.toBeUndefined();
    answer(answering('93.184.215.14'), answering('::1'));
    await expect(check()).rejects.toBeInstanceOf(UnsafeAddressError);
    answer(answering('93.184.215.14', '10.0.0.5'), failing('ENODATA'));
    await expect(check()).rejects.toBeInstanceOf(UnsafeAddressError);
  });

  it('waits for the other family only a moment once one has answered', async () => {
    answer(answering('93.184.215.14'), () => new Promise<string[]>(() => undefined));
    const started = Date.now();
    await expect(check(5_000)).resolves.toBeUndefined();
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it('gives up at its deadline on a resolver that never answers', async () => {
    answer(
      () => new Promise<string[]>(() => undefined),
      () => new Promise<string[]>(() => undefined),
    );
    const started = Date.now();
    await expect(check(50)).rejects.toMatchObject({
      code: 'ETIMEOUT',
      message: 'example.com was not resolved in 50 ms',
    });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it("answers RFC 6761's special names without asking anyone", async () => {
    answers.resolve4.mockClear();
    for (const host of ['localhost', 'api.localhost', 'LOCALHOST.', 'no-such-host.invalid']) {
      await expect(assertPublicHost(new URL(`http://${host}/`), 1_000)).rejects.toBeInstanceOf(
        UnsafeAddressError,
      );
    }
    expect(answers.resolve4).not.toHaveBeenCalled();
  });

  it('hands the socket only the checked addresses of the family it asks for', async () => {
    answer(answering('93.184.215.14'), answering('2606:4700:4700::1111'));
    const looked = (options: { all?: boolean; family?: number }) =>
      new Promise<unknown[]>((resolve) =>
        guardedLookup('example.com', options, (...args) => resolve(args)),
      );
    expect(await looked({ all: true })).toEqual([
      null,
      [
        { address: '93.184.215.14', family: 4 },
        { address: '2606:4700:4700::1111', family: 6 },
      ],
    ]);
    expect(await looked({ family: 6 })).toEqual([null, '2606:4700:4700::1111', 6]);
    expect(await looked({ family: 'IPv4' as unknown as number })).toEqual([
      null,
      '93.184.215.14',
      4,
    ]);
    // A family unanswered is never handed on: only the IPv4 answer, checked.
    answer(answering('93.184.215.14'), failing('ETIMEOUT'));
    expect(await looked({ all: true })).toEqual([null, [{ address: '93.184.215.14', family: 4 }]]);
    // One private answer refuses the name, in the words of a missing one.
    answer(answering('93.184.215.14'), answering('fd00:ec2::254'));
    const [refusal] = await looked({ all: true });
    expect(refusal).toBeInstanceOf(UnsafeAddressError);
    expect((refusal as Error).message).toBe(new UnsafeAddressError('example.com').message);
  });
});
