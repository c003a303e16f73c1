import type { LookupAddress } from 'node:dns';

type LookupCallback = (error: NodeJS.ErrnoException | null, addresses?: LookupAddress[]) => void;
const mockLookup = jest.fn<void, [string, unknown, LookupCallback]>();
jest.mock('node:dns', () => ({
  ...jest.requireActual('node:dns'),
  lookup: (host: string, options: unknown, callback: LookupCallback) =>
    mockLookup(host, options, callback),
}));

import { assertPublicHost, UnsafeAddressError } from './ssrf-guard';

const failing = (code: string) => (_host: string, _options: unknown, callback: LookupCallback) =>
  callback(Object.assign(new Error(`getaddrinfo ${code} example.com`), { code }));

/** The SSRF guard's answer to what the system resolver says (a resolver of our own here). */
describe('SSRF guard: what the resolver says', () => {
  const check = () =>
    assertPublicHost(new URL('https://example.com/hook'), { owner: 'org-1', timeoutMs: 1_000 });

  it('refuses a name that does not exist in the same words as an internal one', async () => {
    for (const code of ['ENOTFOUND', 'ENODATA']) {
      mockLookup.mockImplementationOnce(failing(code));
      await expect(check()).rejects.toThrow(new UnsafeAddressError('example.com').message);
    }
  });

  it('passes on a resolver that could not answer: the name may be fine', async () => {
    for (const code of ['EAI_AGAIN', 'ETIMEOUT', 'ESERVFAIL']) {
      mockLookup.mockImplementationOnce(failing(code));
      const refusal = await check().catch((error: unknown) => error);
      expect(refusal).not.toBeInstanceOf(UnsafeAddressError);
      expect(refusal).toMatchObject({ code });
    }
  });

  it('accepts a name whose every address is public, refuses one with a private answer', async () => {
    mockLookup.mockImplementationOnce((_host, _options, callback) =>
      callback(null, [{ address: '93.184.215.14', family: 4 }]),
    );
    await expect(check()).resolves.toBeUndefined();
    mockLookup.mockImplementationOnce((_host, _options, callback) =>
      callback(null, [
        { address: '93.184.215.14', family: 4 },
        { address: '10.0.0.5', family: 4 },
      ]),
    );
    await expect(check()).rejects.toBeInstanceOf(UnsafeAddressError);
  });

  it('gives up on a resolver that never answers, and one organization cannot take every lookup', async () => {
    const hung: LookupCallback[] = [];
    mockLookup.mockImplementation((_host, _options, callback) => hung.push(callback));
    const hostile = (n: number) =>
      assertPublicHost(new URL(`https://black-hole-${n}.example/`), {
        owner: 'hostile',
        timeoutMs: 50,
      });
    const refusals = await Promise.all([1, 2, 3].map((n) => hostile(n).catch((error) => error)));
    for (const refusal of refusals) {
      expect(refusal).not.toBeInstanceOf(UnsafeAddressError);
      expect(refusal).toMatchObject({ code: 'ETIMEOUT' });
    }
    // Only the first reached the system resolver: the organization's one slot is still taken.
    expect(hung).toHaveLength(1);

    mockLookup.mockImplementation((_host, _options, callback) =>
      callback(null, [{ address: '93.184.215.14', family: 4 }]),
    );
    await expect(
      assertPublicHost(new URL('https://example.com/'), { owner: 'other', timeoutMs: 50 }),
    ).resolves.toBeUndefined();
    hung[0](null, [{ address: '93.184.215.14', family: 4 }]);
  });
});
