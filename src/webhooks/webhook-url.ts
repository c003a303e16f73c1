import type { PortRange } from '../config/webhooks.config';

/** The longest URL an endpoint takes, as sent and once normalised (what is stored). */
export const URL_MAX_LENGTH = 2048;

/** The port a request to `url` connects to: the URL's own, or its scheme's default. */
export function portOf(url: URL): number {
  if (url.port) return Number(url.port);
  return url.protocol === 'https:' ? 443 : 80;
}

/** `[[80, 80], [9000, 9100]]` → `80, 9000-9100`. */
function describePorts(ranges: readonly PortRange[]): string {
  return ranges
    .map(([first, last]) => (first === last ? `${first}` : `${first}-${last}`))
    .join(', ');
}

/**
 * Why `url` may not be sent to on account of its port (WEBHOOK_ALLOWED_PORTS), or undefined.
 * Ports are limited so that an endpoint cannot make the service talk to whatever else listens
 * on a public host (mail, databases, admin consoles): web ports only, by default.
 */
export function portProblem(url: URL, allowed: readonly PortRange[]): string | undefined {
  const port = portOf(url);
  if (allowed.some(([first, last]) => port >= first && port <= last)) return undefined;
  return `port ${port} is not allowed; webhooks are sent to ports ${describePorts(allowed)}`;
}

/**
 * The URL as it is stored and shown: its WHATWG serialisation (scheme and host lower-cased, the
 * default port dropped, dot segments resolved, characters percent-encoded), so that two
 * spellings of one endpoint look alike and what is shown is what is requested.
 */
export function normalizedUrl(text: string): string {
  return new URL(text).href;
}

/**
 * What the audit log keeps of an endpoint's URL: its origin (scheme, host, port). A receiver's
 * credentials often sit in the rest (the path of a Slack or Zapier hook, a `?token=` query); the
 * audit log never holds a secret (contract §18) and outlives the URL by
 * AUDIT_RETENTION_DAYS. The endpoint itself still shows its whole URL to its admins.
 */
export function auditedUrl(href: string): string {
  return new URL(href).origin;
}
