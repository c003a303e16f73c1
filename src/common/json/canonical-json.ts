import type { Hash } from 'node:crypto';

/** Canonical JSON is handed to the hash in pieces of about this many characters. */
const PIECE = 64 * 1024;

/**
 * Feeds `value` to `hash` as JSON with its object keys sorted, so the same value serialised in
 * another key order hashes the same; written in pieces as it goes, never held whole. `value`
 * must be bounded in depth (a parsed body past the depth limit's check).
 */
export function hashCanonicalJson(hash: Hash, value: unknown): Hash {
  const writer = new HashWriter(hash);
  writeCanonical(value, writer);
  writer.flush();
  return hash;
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
