const ESCAPES: Record<string, string> = {
  '"': '"',
  '\\': '\\',
  '/': '/',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
};

/**
 * Pulls the reply's text out of a model's answer while it streams in. Asked for JSON
 * (`{"text": …, "emotion": …, "intensity": …}`), a model streams the JSON; a client of ours wants
 * only the text, piece by piece. So this decodes the top-level `"text"` string as its characters
 * arrive. An answer that does not start with `{` is a provider that ignored the format: its
 * content is the text, passed through as it comes.
 */
export class ReplyTextStream {
  private mode: 'undecided' | 'json' | 'plain' = 'undecided';
  /** JSON scanning state, outside the text value. */
  private depth = 0;
  private inString = false;
  private escaped = false;
  private currentKey = '';
  private readingKey = false;
  private expectingValueOf: string | null = null;
  /** Inside the text value. */
  private inText = false;
  private textDone = false;
  private unicode: string | null = null;
  private pendingHighSurrogate = '';
  private textSoFar = '';

  /** The text decoded so far (what the deltas added up to). */
  get text(): string {
    return this.textSoFar;
  }

  /** True when the answer is plain text rather than JSON. */
  get isPlain(): boolean {
    return this.mode === 'plain';
  }

  /** Feeds a piece of the answer; returns the text it adds (possibly empty). */
  push(chunk: string): string {
    let out = '';
    for (const character of chunk) {
      if (this.mode === 'undecided') {
        if (/\s/.test(character)) continue;
        this.mode = character === '{' ? 'json' : 'plain';
      }
      if (this.mode === 'plain') {
        // A pair split between two of the provider's pieces is held whole, as in JSON: each
        // delta is made storable alone, and the gate checked "��" where the reply held 🔪
        // (found by review).
        out += this.joinSurrogates(character);
        continue;
      }
      out += this.inText ? this.decodeText(character) : this.scan(character);
    }
    this.textSoFar += out;
    return out;
  }

  private scan(character: string): string {
    if (this.inString) {
      if (this.escaped) {
        this.escaped = false;
        if (this.readingKey) this.currentKey += character;
      } else if (character === '\\') {
        this.escaped = true;
      } else if (character === '"') {
        this.inString = false;
        if (this.readingKey) this.readingKey = false;
      } else if (this.readingKey) {
        this.currentKey += character;
      }
      return '';
    }
    if (character === '"') {
      if (this.depth === 1 && this.expectingValueOf === 'text' && !this.textDone) {
        this.inText = true;
        this.expectingValueOf = null;
        return '';
      }
      this.inString = true;
      // A string at depth 1 that is not a value is a key.
      this.readingKey = this.depth === 1 && this.expectingValueOf === null;
      if (this.readingKey) this.currentKey = '';
      return '';
    }
    if (character === ':' && this.depth === 1) this.expectingValueOf = this.currentKey;
    else if (character === ',' && this.depth === 1) this.expectingValueOf = null;
    else if (character === '{' || character === '[') {
      this.depth++;
      if (this.depth > 1) this.expectingValueOf = null;
    } else if (character === '}' || character === ']') this.depth--;
    else if (!/\s/.test(character) && this.depth === 1) this.expectingValueOf = null;
    return '';
  }

  private decodeText(character: string): string {
    if (this.unicode !== null) {
      this.unicode += character;
      if (this.unicode.length < 4) return '';
      const code = /^[0-9a-fA-F]{4}$/.test(this.unicode) ? parseInt(this.unicode, 16) : NaN;
      const literal = `\\u${this.unicode}`;
      this.unicode = null;
      // A broken escape is kept as the text it was, not turned into U+0000.
      return this.joinSurrogates(Number.isNaN(code) ? literal : String.fromCharCode(code));
    }
    if (this.escaped) {
      this.escaped = false;
      if (character === 'u') {
        this.unicode = '';
        return '';
      }
      return this.joinSurrogates(ESCAPES[character] ?? character);
    }
    if (character === '\\') {
      this.escaped = true;
      return '';
    }
    if (character === '"') {
      this.inText = false;
      this.textDone = true;
      return this.joinSurrogates('');
    }
    return this.joinSurrogates(character);
  }

  /**
   * A \uD83D\uDE00 pair arrives as two escapes, or as two pieces of plain text: hold the first
   * half until the second.
   */
  private joinSurrogates(text: string): string {
    const held = this.pendingHighSurrogate;
    this.pendingHighSurrogate = '';
    if (text.length === 1 && text >= '\ud800' && text <= '\udbff') {
      this.pendingHighSurrogate = text;
      return held;
    }
    return held + text;
  }
}
