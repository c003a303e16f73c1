import { createHash } from 'node:crypto';
import { SpooledDocument } from '../common/http/spooled-document';
import { hashCanonicalJson } from '../common/json/canonical-json';

/**
 * What "the same request" means: the method, the path with its query, and the body as JSON with
 * its object keys sorted, so a client that serialises the same object in another key order is
 * still sending the same request. An absent body counts as `{}` (bodiless endpoints). The body
 * has already passed the JSON body middleware's depth limit, so the walk is bounded. The
 * canonical text is hashed as it is written, never held whole. A document route's body (an
 * import's, up to IMPORT_MAX_BYTES) is the one exception: it is spooled, never parsed whole, so
 * its bytes count, as they came (docs/idempotency.md).
 */
export function requestFingerprint(method: string, url: string, body: unknown): Buffer {
  const hash = createHash('sha256').update(method).update('\n').update(url).update('\n');
  // A document route's body (the import's) is never held parsed: its bytes' digest stands for it.
  if (body instanceof SpooledDocument) return hash.update(body.digest).digest();
  return hashCanonicalJson(hash, body ?? {}).digest();
}
