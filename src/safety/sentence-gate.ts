export type SentenceVerdict = 'allow' | 'block';
export type GateState = 'open' | 'blocked';

export interface SentenceGateOptions {
  /**
   * Decides one sentence read after `context`, the sentences released before it (whole
   * sentences, the last `contextLength` characters of them at most): `block` when the two
   * together are harmful, which stops the gate. A rejection stops it too, and is rethrown. A
   * reply of more than one sentence is checked whole once more at its end, as one sentence.
   */
  check: (sentence: string, context: string) => Promise<SentenceVerdict>;
  /**
   * Receives the text in order, a checked sentence at a time; the pieces add up to the input.
   * Awaited: a release that waits (a client not reading) holds the gate.
   */
  release: (text: string) => void | Promise<void>;
  /** A run without a sentence end is cut (at a space when there is one) beyond this. */
  maxSentenceLength?: number;
  /** How much of the released text a check reads before the sentence; default 2,000 characters. */
  contextLength?: number;
  /**
   * Text of the same reply released before this gate (what a tool turn said before its pause):
   * the first checks read it as context, and the end's whole-reply check begins with it. It was
   * not necessarily checked (a pause answered without streaming), so the whole reply is always
   * checked at the end when there is some.
   */
  releasedBefore?: string;
}

const TERMINATORS = new Set(['.', '!', '?', '…']);
const WIDE_TERMINATORS = new Set(['。', '！', '？']);
/** Closing marks that belong to the sentence they follow: `"Stop." She left`. */
const CLOSERS = new Set(['"', "'", '”', '’', '»', ')', ']', '」', '』']);
// prettier-ignore
const ABBREVIATIONS = new Set([
  'mr', 'mrs', 'ms', 'dr', 'prof', 'st', 'vs', 'jr', 'sr', 'sra', 'srta', 'dra', 'fig', 'vol',
  'approx', 'ca', 'nr', 'bzw', 'vgl', 'ggf', 'evtl', 'inkl', 'zzgl', 'hr', 'fr', 'mme', 'mlle',
  'av', 'ej', 'pág', 'p',
]);

function isWhitespace(char: string): boolean {
  return char === ' ' || char === '\t' || char === '\n' || char === '\r' || /\s/.test(char);
}

function isLetter(char: string | undefined): boolean {
  return char !== undefined && /\p{L}/u.test(char);
}

/**
 * Text cut after each sentence end (a terminator and its closers, then white space) or line
 * break, and at `maxLength`: the pieces add up to the text. Looser than the gate's own reading
 * (no abbreviations): it only bounds how much of earlier text a check reads.
 */
function sentencesOf(text: string, maxLength: number): string[] {
  // A run of terminators is matched from its first only: linear in the run, however long.
  const ends = [...text.matchAll(/(?<![.!?…])[.!?…]+["'”’»)\]」』]*\s+|[。！？]|\n/gu)].map(
    (end) => end.index + end[0].length,
  );
  return [0, ...ends]
    .map((start, i) => text.slice(start, ends[i] ?? text.length))
    .filter((piece) => piece !== '')
    .flatMap((piece) =>
      Array.from({ length: Math.ceil(piece.length / maxLength) }, (_, i) =>
        piece.slice(i * maxLength, (i + 1) * maxLength),
      ),
    );
}

/**
 * Streams a reply through a moderation check a sentence at a time: text is released only once the
 * sentence it belongs to was checked, and at most one sentence is held back, the one being
 * completed or checked (when the caller awaits each `push` before the next). A `block` stops the
 * release for good; the caller replaces the reply with a refusal.
 *
 * A sentence is checked together with the sentences released before it, so that harm told across
 * sentences ("I will kill him. The knife is ready.") is seen before the second one is released.
 * The context is bounded (`contextLength`, whole sentences), so a check reads at most that much
 * plus its sentence, whatever the reply's length. And a reply of more than one sentence is
 * checked whole once more at its end: whatever a check of the whole reply blocks, the gate
 * blocks, before the harmful sentence is released when the context shows it and at the end
 * otherwise. A check may read less than its context when it can tell the sentence adds nothing
 * (`ReplySafety`); the end's check does not depend on it.
 *
 * A sentence ends after `.` `!` `?` `…` (a run of them, then closing quotes or brackets) followed
 * by whitespace, after a newline, or after `。` `！` `？`. Best effort against splitting too
 * early: a `.` not followed by whitespace never ends one (3.5, example.com, e.g.x), nor does a `.`
 * after a single letter ("e.g. ", "J. Smith") or a common abbreviation ("Dr. ", "z.B. ", "Sr. ").
 * A sentence end at the very end of the text so far waits for the next delta to be sure. Each
 * character is scanned once, whatever the deltas' sizes.
 */
export class SentenceGate {
  private readonly check: SentenceGateOptions['check'];
  private readonly release: SentenceGateOptions['release'];
  private readonly maxSentenceLength: number;
  private readonly contextLength: number;
  /** The sentences released, in order. */
  private readonly released: string[] = [];
  /** `released[contextStart..]`: the context of the next check, `contextChars` long. */
  private contextStart = 0;
  private contextChars = 0;
  /** Sentences checked, and what the last check was given, context and sentence. */
  private checks = 0;
  private lastChecked = '';
  /** Text received and not yet released. */
  private pending = '';
  /** Up to where `pending` is known to hold no sentence end. */
  private scanned = 0;
  private queue: Promise<void> = Promise.resolve();
  private ended = false;
  private failure: { error: unknown } | undefined;
  private blocked: string | undefined;
  /** Whether the reply began with text released before this gate (releasedBefore). */
  private readonly seeded: boolean;

  constructor(options: SentenceGateOptions) {
    this.check = options.check;
    this.release = options.release;
    this.maxSentenceLength = options.maxSentenceLength ?? 1000;
    this.contextLength = options.contextLength ?? 2000;
    // A sentence at a time, as if released here: the context keeps its last whole sentences.
    this.seeded = (options.releasedBefore ?? '') !== '';
    for (const sentence of sentencesOf(options.releasedBefore ?? '', this.maxSentenceLength)) {
      this.remember(sentence);
    }
  }

  get state(): GateState {
    return this.blocked === undefined ? 'open' : 'blocked';
  }

  /** The sentence a check blocked, if one did: the whole reply when the end's check did. */
  get blockedSentence(): string | undefined {
    return this.blocked;
  }

  /** Adds a delta; resolves once every sentence it completed is checked and released. */
  push(delta: string): Promise<GateState> {
    if (this.ended) return Promise.reject(new Error('SentenceGate: push after end'));
    if (this.blocked === undefined) this.pending += delta;
    return this.enqueue(false);
  }

  /** Checks and releases the rest; resolves with whether the whole reply went through. */
  end(): Promise<GateState> {
    this.ended = true;
    return this.enqueue(true);
  }

  private enqueue(final: boolean): Promise<GateState> {
    const run = this.queue.then(async () => {
      if (this.failure) throw this.failure.error;
      try {
        await this.releaseComplete(final);
      } catch (error) {
        this.failure = { error };
        throw error;
      }
    });
    this.queue = run.catch(() => undefined);
    return run.then(() => this.state);
  }

  private async releaseComplete(final: boolean): Promise<void> {
    for (;;) {
      if (this.blocked !== undefined) return;
      const end = this.nextSentenceEnd(final);
      if (end === -1) break;
      const sentence = this.pending.slice(0, end);
      // Whitespace alone ("\n" after a sentence) cannot be harmful: not worth a check.
      if (sentence.trim() !== '' && !(await this.approve(sentence))) return;
      await this.releaseSentence(sentence);
      // Deltas pushed meanwhile were appended: `end` still marks the same place.
      this.pending = this.pending.slice(end);
      this.scanned = 0;
    }
    if (!final) return;
    if (this.pending !== '') {
      const rest = this.pending;
      if (rest.trim() !== '' && !(await this.approve(rest))) return;
      this.pending = '';
      await this.releaseSentence(rest);
    }
    // Checks that read less than the whole reply may have missed what only the whole shows.
    const whole = this.released.join('');
    // A check that read the whole reply as context and sentence may have skipped reading it (a
    // sentence that adds nothing to clean context): not so when the context came from before.
    const checkedWhole =
      !this.seeded && this.checks === 1 && this.lastChecked.trimEnd() === whole.trimEnd();
    if (whole.trim() !== '' && !checkedWhole) await this.approve(whole, '');
  }

  private async approve(
    sentence: string,
    context = this.released.slice(this.contextStart).join(''),
  ): Promise<boolean> {
    this.checks++;
    this.lastChecked = context + sentence;
    if ((await this.check(sentence, context)) === 'allow') return true;
    this.blocked = sentence;
    this.pending = '';
    return false;
  }

  private async releaseSentence(sentence: string): Promise<void> {
    await this.release(sentence);
    this.remember(sentence);
  }

  /** Keeps released text for the checks' context and the whole-reply check. */
  private remember(sentence: string): void {
    this.released.push(sentence);
    this.contextChars += sentence.length;
    while (this.contextChars > this.contextLength) {
      this.contextChars -= this.released[this.contextStart].length;
      this.contextStart++;
    }
  }

  /** The index just after the first complete sentence in `pending`, or -1. */
  private nextSentenceEnd(final: boolean): number {
    const text = this.pending;
    for (let at = this.scanned; at < text.length; at++) {
      const char = text[at];
      if (char === '\n') return at + 1;
      const wide = WIDE_TERMINATORS.has(char);
      if (!wide && !TERMINATORS.has(char)) continue;
      let after = at + 1;
      while (!wide && after < text.length && TERMINATORS.has(text[after])) after++;
      while (after < text.length && CLOSERS.has(text[after])) after++;
      if (after === text.length) {
        if (final) return after;
        // The next delta decides: more closers, a space, or a letter (3.5, e.g.x).
        this.scanned = at;
        return this.cutIfTooLong();
      }
      if (wide) return after;
      if (!isWhitespace(text[after])) {
        at = after - 1;
        continue;
      }
      if (char === '.' && after === at + 1 && this.isAbbreviation(at)) continue;
      return after;
    }
    this.scanned = text.length;
    return this.cutIfTooLong();
  }

  /** "e.g.", "J.", "Dr.", "z.B.": a `.` after one letter or a known abbreviation. */
  private isAbbreviation(period: number): boolean {
    const text = this.pending;
    let start = period;
    while (start > 0 && isLetter(text[start - 1])) start--;
    const word = text.slice(start, period).toLowerCase();
    if (word.length === 1) return true;
    return ABBREVIATIONS.has(word);
  }

  private cutIfTooLong(): number {
    if (this.pending.length <= this.maxSentenceLength) return -1;
    const space = this.pending.lastIndexOf(' ', this.maxSentenceLength);
    return space > this.maxSentenceLength / 2 ? space + 1 : this.maxSentenceLength;
  }
}
