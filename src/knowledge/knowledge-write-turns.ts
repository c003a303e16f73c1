import { Injectable } from '@nestjs/common';
import { Slots } from '../common/concurrency/slots';
import { tooManyStreams } from '../common/streams/stream-slots.service';

/** Writes of one organization that may wait on this instance behind the one running. */
export const KNOWLEDGE_WRITES_WAITING = 8;

/** A write of this much content or more is heavy: it takes one of the instance's heavy slots. */
export const KNOWLEDGE_HEAVY_WRITE_BYTES = 64 * 1024;

/** Heavy writes running at once on an instance, every organization's together. */
export const KNOWLEDGE_HEAVY_WRITES_AT_ONCE = 1;

/** How long a heavy write may wait for its slot before it is refused (429). */
export const KNOWLEDGE_HEAVY_WRITE_WAIT_MS = 30_000;

/** Heavy writes waiting on an instance; each organization has at most one (its turn's). */
const HEAVY_WRITES_WAITING = 64;

interface Turns {
  /** The writes of the organization here: the one running and those waiting. */
  inFlight: number;
  /** Settles when the last write queued has ended. */
  last: Promise<void>;
}

/** A heavy write's wait for its slot: 429 past its time, or with the line full. */
const HEAVY_WAIT = {
  timeoutMs: KNOWLEDGE_HEAVY_WRITE_WAIT_MS,
  full: () =>
    tooManyStreams('Too many large documents are being written on this instance; retry shortly'),
  tooLong: () =>
    tooManyStreams(
      `Large documents of other organizations took this instance for ${KNOWLEDGE_HEAVY_WRITE_WAIT_MS / 1000} s; retry shortly`,
    ),
};

/**
 * The organization's writes of documents on this instance, one at a time, each waiting its turn
 * here before it takes a database connection. Every write takes the organization's lock in the
 * database (KNOWLEDGE_MAX_BYTES) and a large one holds it for a second: waiting for it there, a
 * dozen writes of one organization held every pooled connection, and every other organization's
 * requests failed (found by review). Now at most one connection per instance waits on the lock,
 * for writes of the same organization on other instances. Past KNOWLEDGE_WRITES_WAITING writes
 * waiting, 429 `too_many_streams` with Retry-After, as an import past its slots.
 *
 * A heavy write (KNOWLEDGE_HEAVY_WRITE_BYTES of content or more) then waits, in its turn, for one
 * of KNOWLEDGE_HEAVY_WRITES_AT_ONCE slots the instance's organizations share, first come first
 * served. A 1 MiB document's postings are one statement of up to 3 s of database time (131,000
 * distinct words); three organizations' at once took both cores, and another tenant's upload ran
 * past the statement timeout (found by review). One at a time, they take one core at most, and
 * since an organization waits with one write at most, each waits behind at most one write of
 * every other organization uploading.
 */
@Injectable()
export class KnowledgeWriteTurns {
  private readonly byOrganization = new Map<string, Turns>();
  private readonly heavy = new Slots(KNOWLEDGE_HEAVY_WRITES_AT_ONCE, HEAVY_WRITES_WAITING);

  /**
   * `write` in the organization's turn; `bytes`: the content it writes or deletes, if any, or
   * how to read it once the turn has come (what a document holds is then what the organization's
   * earlier writes on this instance left). When `signal` aborts (its client went) before the
   * write starts, it leaves the line at once and its reason is thrown: a client that hung up no
   * longer holds its organization's place or an instance's heavy slot for the 30 s it could wait.
   */
  async inTurn<T>(
    organizationId: string,
    write: () => Promise<T>,
    bytes: number | (() => Promise<number>) = 0,
    signal?: AbortSignal,
  ): Promise<T> {
    const turns = this.byOrganization.get(organizationId) ?? {
      inFlight: 0,
      last: Promise.resolve(),
    };
    if (turns.inFlight > KNOWLEDGE_WRITES_WAITING) {
      throw tooManyStreams(
        `This organization already has ${KNOWLEDGE_WRITES_WAITING} writes of documents waiting on this instance; retry when one ends`,
      );
    }
    let ended!: () => void;
    const before = turns.last;
    turns.last = new Promise<void>((resolve) => (ended = resolve));
    turns.inFlight += 1;
    this.byOrganization.set(organizationId, turns);
    let leftEarly = false;
    try {
      leftEarly = await aborts(before, signal);
      if (leftEarly) throw signal!.reason;
      const weight = typeof bytes === 'number' ? bytes : await bytes();
      signal?.throwIfAborted();
      if (weight < KNOWLEDGE_HEAVY_WRITE_BYTES) return await write();
      return await this.heavy.run({ ...HEAVY_WAIT, signal }, write);
    } finally {
      // Gone before its turn: the writes behind it still wait for the ones ahead of it.
      if (leftEarly) void before.then(ended);
      else ended();
      turns.inFlight -= 1;
      if (turns.inFlight === 0) this.byOrganization.delete(organizationId);
    }
  }

  /** The organization's writes running or waiting here (tests). */
  inFlight(organizationId: string): number {
    return this.byOrganization.get(organizationId)?.inFlight ?? 0;
  }
}

/** Waits for `turn`; true if `signal` aborted first (or already had). */
function aborts(turn: Promise<void>, signal: AbortSignal | undefined): Promise<boolean> {
  if (!signal) return turn.then(() => false);
  if (signal.aborted) return Promise.resolve(true);
  return new Promise<boolean>((resolve) => {
    const onAbort = () => resolve(true);
    signal.addEventListener('abort', onAbort, { once: true });
    void turn.then(() => {
      signal.removeEventListener('abort', onAbort);
      resolve(false);
    });
  });
}
