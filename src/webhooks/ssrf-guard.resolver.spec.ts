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
  const check = () => assertPublicHost(new URL('https://example.com/hook'));

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
});
