import { createHash, type Hash } from 'node:crypto';
import { SpooledDocument } from '../common/http/spooled-document';

/** Canonical JSON is handed to the hash in pieces of about this many characters. */
const PIECE = 64 * 1024;

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
  const writer = new HashWriter(hash);
  writeCanonical(body ?? {}, writer);
  writer.flush();
  return hash.digest();
}

class HashWriter {
  private pending = '';

  constructor(private readonly hash: Hash) {}

  write(text: string): void {
    this.pending += text;
    if (this.pending.length >= PIECE) this.flush();
  }

  flush(): void {
    if (this.pending.length > 0) this.hash.update(this.pending);
    this.pending = '';
  }
}

function writeCanonical(value: unknown, out: HashWriter): void {
  if (Array.isArray(value)) {
    out.write('[');
    value.forEach((item, index) => {
      if (index > 0) out.write(',');
      writeCanonical(item, out);
    });
    out.write(']');
    return;
  }
  if (value !== null && typeof value === 'object') {
    out.write('{');
    Object.keys(value)
      .sort()
      .forEach((key, index) => {
        out.write(`${index > 0 ? ',' : ''}${JSON.stringify(key)}:`);
        writeCanonical((value as Record<string, unknown>)[key], out);
      });
    out.write('}');
    return;
  }
  out.write(JSON.stringify(value) ?? 'null');
}
