import {
  assertPublicHost,
  guardedLookup,
  isPublicAddress,
  UnsafeAddressError,
  urlFormProblem,
} from './ssrf-guard';

const timeoutMs = 5_000;

describe('SSRF guard', () => {
  it.each([
    '127.0.0.1',
    '127.255.0.3',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.100.100.200',
    '0.0.0.0',
    '224.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fe80::1',
    'fc00::1',
    'fd00:ec2::254',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:169.254.169.254',
    '64:ff9b::10.0.0.1',
    '2002:7f00:1::',
    '2001:db8::1',
    '2001:2::1',
    '2001:10::1',
    '2001:2f:ffff::1',
    '3fff:fff::1',
    '5f00::1',
  ])('refuses %s', (address) => {
    expect(isPublicAddress(address)).toBe(false);
  });

  it.each([
    '93.184.215.14',
    '8.8.8.8',
    '172.32.0.1',
    '2606:4700:4700::1111',
    '::ffff:8.8.8.8',
    // Just outside the blocked ranges beside them.
    '2001:3::1',
    '2001:30::1',
    '3fff:1000::1',
  ])('accepts %s', (address) => {
    expect(isPublicAddress(address)).toBe(true);
  });

  it('refuses names that resolve to loopback, and address literals in any URL spelling', async () => {
    const refusal = assertPublicHost(new URL('http://localhost:8080/hook'), timeoutMs);
    await expect(refusal).rejects.toThrow('localhost is not a public address');
    // Never what the name resolved to.
    await expect(refusal).rejects.not.toThrow(/127\.0\.0\.1|::1/);
    for (const url of [
      'http://[::1]/',
      'http://2130706433/',
      'http://0x7f.1/',
      'http://[::ffff:127.0.0.1]/',
      'http://169.254.169.254/latest/meta-data/',
    ]) {
      await expect(assertPublicHost(new URL(url), timeoutMs)).rejects.toThrow(
        /not a public address/,
      );
    }
    await expect(
      assertPublicHost(new URL('https://93.184.215.14/hook'), timeoutMs),
    ).resolves.toBeUndefined();
  });

  it('says the same of a name that does not resolve as of one that resolves to loopback', async () => {
    const refusal = async (host: string) =>
      (await assertPublicHost(new URL(`http://${host}:8080/hook`), timeoutMs).catch(
        (error) => error,
      )) as Error;
    const internal = await refusal('localhost');
    const missing = await refusal('no-such-host.invalid');
    expect(missing).toBeInstanceOf(UnsafeAddressError);
    expect(missing.message).toBe(internal.message.replace('localhost', 'no-such-host.invalid'));

    // At delivery too: the socket's lookup refuses both alike.
    const lookedUp = (host: string) =>
      new Promise<Error | null>((resolve) => guardedLookup(host, {}, (error) => resolve(error)));
    expect((await lookedUp('no-such-host.invalid'))?.message).toBe(missing.message);
    expect((await lookedUp('localhost'))?.message).toBe(internal.message);
  });

  it('accepts only absolute http(s) URLs without credentials', () => {
    expect(urlFormProblem('https://example.com/hook')).toBeUndefined();
    expect(urlFormProblem('ftp://example.com/')).toMatch(/http or https/);
    expect(urlFormProblem('/relative')).toMatch(/absolute/);
    expect(urlFormProblem('https://user:pw@example.com/')).toMatch(/user name or password/);
  });
});
