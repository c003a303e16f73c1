import { createHash } from 'node:crypto';

/**
 * What "the same request" means: the method, the path with its query, and the body as JSON with
 * its object keys sorted, so a client that serialises the same object in another key order is
 * still sending the same request. An absent body counts as `{}` (bodiless endpoints). The body
 * has already passed the JSON body middleware's depth limit, so the walk is bounded.
 */
export function requestFingerprint(method: string, url: string, body: unknown): Buffer {
  return createHash('sha256')
    .update(method)
    .update('\n')
    .update(url)
    .update('\n')
    .update(canonicalJson(body ?? {}))
    .digest();
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
