import type { LookupAddress } from 'node:dns';
import { Resolver } from 'node:dns/promises';
import { BlockList, isIP, isIPv4 } from 'node:net';
import { CONTROL_CHARACTER } from '../common/validation/no-control-characters';

/**
 * Server-side request forgery guard (contract §17): webhook URLs may not reach loopback,
 * private, link-local, cloud-metadata or otherwise non-public addresses, whether the URL names
 * the address or a host that resolves to it.
 */

/** IPv4 ranges that are not public unicast (RFC 6890 and friends). */
const BLOCKED_V4: Array<[string, number]> = [
  ['0.0.0.0', 8], // "this network"
  ['10.0.0.0', 8], // private
  ['100.64.0.0', 10], // carrier-grade NAT (Alibaba's metadata is 100.100.100.200)
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local (AWS, GCP, Azure metadata at 169.254.169.254)
  ['172.16.0.0', 12], // private
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation
  ['192.88.99.0', 24], // 6to4 relay anycast
  ['192.168.0.0', 16], // private
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation
  ['203.0.113.0', 24], // documentation
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
];

/**
 * Inside global unicast (2000::/3), the ranges that are not plain public hosts: those IANA's
 * special-purpose registry marks not globally reachable, the tunnels that embed an IPv4 address,
 * and ORCHID identifiers, which name no host.
 */
const BLOCKED_V6_GLOBAL: Array<[string, number]> = [
  ['2001::', 32], // Teredo (tunnels to an embedded IPv4 address)
  ['2001:2::', 48], // benchmarking
  ['2001:10::', 28], // ORCHID (deprecated)
  ['2001:20::', 28], // ORCHIDv2
  ['2001:db8::', 32], // documentation
  ['2002::', 16], // 6to4 (embeds an IPv4 address)
  ['3fff::', 20], // documentation (RFC 9637)
  ['5f00::', 16], // segment routing (SRv6) SIDs, a network's own
];

const blockedV4 = new BlockList();
for (const [network, prefix] of BLOCKED_V4) blockedV4.addSubnet(network, prefix, 'ipv4');
const globalV6 = new BlockList();
globalV6.addSubnet('2000::', 3, 'ipv6');
const blockedV6 = new BlockList();
for (const [network, prefix] of BLOCKED_V6_GLOBAL) blockedV6.addSubnet(network, prefix, 'ipv6');

/** The 8 groups of 16 bits of an IPv6 address (which isIP has already accepted). */
function hextets(address: string): number[] {
  let text = address.split('%')[0].toLowerCase();
  // A trailing dotted IPv4 part (::ffff:1.2.3.4) becomes two groups.
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted[1].split('.').map(Number);
    text =
      text.slice(0, -dotted[1].length) +
      `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') : [text, undefined];
  const left = head ? head.split(':') : [];
  const right = tail ? tail.split(':') : [];
  const missing = tail === undefined ? 0 : 8 - left.length - right.length;
  return [...left, ...Array<string>(missing).fill('0'), ...right].map((group) =>
    parseInt(group, 16),
  );
}

/** The IPv4 address an IPv4-mapped (::ffff:0:0/96) or NAT64 (64:ff9b::/96) address carries. */
function embeddedIPv4(groups: number[]): string | undefined {
  const mapped = groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff;
  const nat64 =
    groups[0] === 0x64 && groups[1] === 0xff9b && groups.slice(2, 6).every((g) => g === 0);
  if (!mapped && !nat64) return undefined;
  return [groups[6] >> 8, groups[6] & 0xff, groups[7] >> 8, groups[7] & 0xff].join('.');
}

/** True for a public unicast address, the only kind a webhook may be sent to. */
export function isPublicAddress(address: string): boolean {
  if (isIPv4(address)) return !blockedV4.check(address, 'ipv4');
  if (isIP(address) !== 6) return false;
  const groups = hextets(address);
  const v4 = embeddedIPv4(groups);
  if (v4 !== undefined) return !blockedV4.check(v4, 'ipv4');
  const normalized = groups.map((g) => g.toString(16)).join(':');
  return globalV6.check(normalized, 'ipv6') && !blockedV6.check(normalized, 'ipv6');
}

/** The host of a URL as an address or a name (`[::1]` loses its brackets). */
export function hostOf(url: URL): string {
  return url.hostname.replace(/^\[(.*)\]$/, '$1');
}

/** Why a URL may not be a webhook endpoint, or undefined when it may (checks the form only). */
export function urlFormProblem(text: string): string | undefined {
  // The URL parser drops tabs and line breaks silently: the stored URL would not be the one sent.
  if (CONTROL_CHARACTER.test(text)) return 'must not contain control characters';
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return 'must be an absolute http or https URL';
  }
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an http or https URL';
  if (url.username || url.password) return 'must not carry a user name or password';
  if (!url.hostname) return 'must name a host';
  return undefined;
}

/**
 * A host that is, or resolves to, an address that is not public, or a name that does not resolve.
 * The message names the host as the URL gave it, never the address a name resolved to; and a
 * name refused for either reason gets the same message: telling "internal" from "no such name"
 * would map the internal DNS for whoever can create endpoints (or CNAME a domain of theirs to an
 * internal name and watch their deliveries).
 */
export class UnsafeAddressError extends Error {
  constructor(host: string) {
    super(
      isIP(host)
        ? `${host} is not a public address`
        : `${host} is not a public address: it does not resolve to one`,
    );
    this.name = 'UnsafeAddressError';
  }
}

/** The resolver's answers that say a name does not exist (not that it could not be asked). */
const NO_SUCH_NAME = new Set(['ENOTFOUND', 'ENODATA', 'EBADNAME']);

/**
 * The names a tenant chose are resolved by c-ares (`dns.Resolver`), never by the system's
 * getaddrinfo (`dns.lookup`): getaddrinfo runs on libuv's thread pool, which argon2, files and
 * zlib share, and cannot be cancelled, so names whose nameserver never answers held its threads
 * for the system resolver's whole timeout, and a few tenants could hold them all (found by
 * review). c-ares asks from the event loop, each try bounded (1 s, then 2 s for the second
 * round: about 3 s a nameserver). It reads /etc/resolv.conf, not /etc/hosts: a name only
 * /etc/hosts knows is refused as not resolving (a local resolver serving it over DNS, as
 * systemd-resolved or Docker's does, answers it; its addresses are checked as any).
 */
const resolver = new Resolver({ timeout: 1_000, tries: 2 });

/** RFC 6761's special-use names: `localhost` is loopback and `invalid` never resolves. */
const SPECIAL_USE_NAME = /(^|\.)(localhost|invalid)\.?$/i;

/**
 * Once one family has answered, how long the other is waited for. A resolver that lets AAAA
 * queries time out (some do) would otherwise cost each lookup its whole timeout (review).
 */
const OTHER_FAMILY_GRACE_MS = 300;

/**
 * Every address a name resolves to, IPv4 then IPv6; UnsafeAddressError when it does not exist.
 * A family the resolver could not answer for (ETIMEOUT, ESERVFAIL, ECONNREFUSED), or not within
 * OTHER_FAMILY_GRACE_MS of the other's answer, is left out when the other answered: only
 * addresses answered and checked ever reach a socket. When neither answered, the name rejects
 * with the resolver's error: it may be fine.
 */
async function resolveName(host: string): Promise<LookupAddress[]> {
  if (SPECIAL_USE_NAME.test(host)) throw new UnsafeAddressError(host);
  const answered: Array<string[] | undefined> = [undefined, undefined];
  let unanswered: NodeJS.ErrnoException | undefined;
  await new Promise<void>((done) => {
    let grace: NodeJS.Timeout | undefined;
    let pending = 2;
    const settle = () => {
      pending -= 1;
      if (pending === 0) {
        clearTimeout(grace);
        done();
      }
    };
    [resolver.resolve4(host), resolver.resolve6(host)].forEach((query, index) => {
      void query.then(
        (addresses) => {
          answered[index] = addresses;
          grace ??= setTimeout(done, OTHER_FAMILY_GRACE_MS);
          settle();
        },
        (error: NodeJS.ErrnoException) => {
          if (!NO_SUCH_NAME.has(error.code ?? '')) unanswered ??= error;
          settle();
        },
      );
    });
  });
  const addresses = answered.flatMap((found, index) =>
    (found ?? []).map((address) => ({ address, family: index === 0 ? 4 : 6 })),
  );
  if (addresses.length > 0) return addresses;
  throw unanswered ?? new UnsafeAddressError(host);
}

/** `work`, or an ETIMEOUT error once `timeoutMs` has passed without its answer. */
function withinMs<T>(work: Promise<T>, host: string, timeoutMs: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const error: NodeJS.ErrnoException = new Error(`${host} was not resolved in ${timeoutMs} ms`);
      error.code = 'ETIMEOUT';
      reject(error);
    }, timeoutMs);
    timer.unref();
  });
  return Promise.race([work, deadline]).finally(() => clearTimeout(timer));
}

/**
 * Checks the host of `url`: an address must be public; a name must resolve, and to public
 * addresses only (one private answer is enough to refuse: DNS rebinding may pick it next time).
 * Throws UnsafeAddressError, or the resolver's error when it could not answer (ETIMEOUT past
 * `timeoutMs`).
 */
export async function assertPublicHost(url: URL, timeoutMs: number): Promise<void> {
  const host = hostOf(url);
  if (isIP(host)) {
    if (!isPublicAddress(host)) throw new UnsafeAddressError(host);
    return;
  }
  for (const { address } of await withinMs(resolveName(host), host, timeoutMs)) {
    if (!isPublicAddress(address)) throw new UnsafeAddressError(host);
  }
}

type LookupCallback = (
  error: NodeJS.ErrnoException | null,
  address: string | LookupAddress[],
  family?: number,
) => void;

/**
 * A `lookup` for http.request / net.connect that resolves the name and hands the socket only
 * addresses it has checked, so the address connected to is the address checked (no window for
 * DNS rebinding between a check and the connection).
 */
export function guardedLookup(
  hostname: string,
  options: { all?: boolean; family?: number | string },
  callback: LookupCallback,
): void {
  resolveName(hostname).then(
    (addresses) => {
      const unsafe = addresses.find(({ address }) => !isPublicAddress(address));
      if (unsafe) {
        callback(new UnsafeAddressError(hostname), '');
        return;
      }
      const family = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
      const usable = family ? addresses.filter((a) => a.family === family) : addresses;
      if (usable.length === 0) {
        const error: NodeJS.ErrnoException = new Error(`${hostname} has no usable address`);
        error.code = 'ENOTFOUND';
        callback(error, '');
        return;
      }
      if (options.all) callback(null, usable);
      else callback(null, usable[0].address, usable[0].family);
    },
    (error: NodeJS.ErrnoException) => callback(error, ''),
  );
}
