import type { IncomingMessage } from 'node:http';
import { clientAddressOf } from './sdk';

const request = (forwardedFor?: string | string[]) =>
  ({
    headers: forwardedFor === undefined ? {} : { 'x-forwarded-for': forwardedFor },
    socket: { remoteAddress: '::ffff:10.0.0.9' },
  }) as unknown as IncomingMessage;

describe("clientAddressOf (a span's client.address)", () => {
  it('is the peer without TRUST_PROXY, whatever X-Forwarded-For says', () => {
    expect(clientAddressOf(request('203.0.113.7'), false)).toBe('::ffff:10.0.0.9');
    expect(clientAddressOf(request(), true)).toBe('::ffff:10.0.0.9');
  });

  it.each([
    ['203.0.113.7', '203.0.113.7'],
    // The last entry is the one the load balancer appended; the first is the client's claim.
    ['198.51.100.1, 203.0.113.7', '203.0.113.7'],
    [['198.51.100.1', '2001:db8::1'], '2001:db8::1'],
    // Empty entries are skipped, as request.ip skips them.
    ['198.51.100.1, ', '198.51.100.1'],
    [' , ', '::ffff:10.0.0.9'],
    ['someone@example.com', '::ffff:10.0.0.9'],
    // isIP takes an IPv6 zone id of any length: 15 KB of text would have been kept.
    [`fe80::1%${'x'.repeat(15_000)}`, '::ffff:10.0.0.9'],
    ['fe80::1%eth0', '::ffff:10.0.0.9'],
    [`1.2.3.4${' '.repeat(100)}`, '1.2.3.4'],
  ])('under TRUST_PROXY, X-Forwarded-For %j is %j', (header, address) => {
    expect(clientAddressOf(request(header), true)).toBe(address);
  });
});
