import { Injectable } from '@nestjs/common';
import { KeyedLine } from '../common/concurrency/keyed-line';
import { Slots } from '../common/concurrency/slots';
import { tooManyStreams } from '../common/streams/stream-slots.service';
import { OrganizationsService } from '../organizations/organizations.service';

/** Writes of one organization that may wait on this instance behind the one running. */
export const KNOWLEDGE_WRITES_WAITING = 8;

/** A write of this much content or more is heavy: it takes one of the instance's heavy slots. */
export const KNOWLEDGE_HEAVY_WRITE_BYTES = 64 * 1024;

/** Heavy writes running at once on an instance, every organization's together. */
export const KNOWLEDGE_HEAVY_WRITES_AT_ONCE = 1;

/** How long a heavy write may wait for its slot before it is refused (429). */
export const KNOWLEDGE_HEAVY_WRITE_WAIT_MS = 30_000;

/** Heavy writes waiting on an instance; each account has at most one. */
const HEAVY_WRITES_WAITING = 64;

/** A heavy write's wait for its slot: 429 past its time, or with the line full. */
const HEAVY_WAIT = {
  timeoutMs: KNOWLEDGE_HEAVY_WRITE_WAIT_MS,
  full: () =>
    tooManyStreams('Too many large documents are being written on this instance; retry shortly'),
  tooLong: () =>
    tooManyStreams(
      `Large documents written before this one took this instance for ${KNOWLEDGE_HEAVY_WRITE_WAIT_MS / 1000} s; retry shortly`,
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
 * past the statement timeout (found by review). One at a time, they take one core at most. Each
 * account (the user who made an organization: OrganizationsService.accountOf) waits for the slot
 * with one write at most, all its organizations together, so every write waits behind at most
 * one of every other account uploading: per organization, one user's ten organizations kept
 * another tenant's upload waiting 25 to 40 s (found by review).
 */
@Injectable()
export class KnowledgeWriteTurns {
  private readonly byOrganization = new KeyedLine();
  private readonly heavyByAccount = new KeyedLine();
  private readonly heavy = new Slots(KNOWLEDGE_HEAVY_WRITES_AT_ONCE, HEAVY_WRITES_WAITING);

  constructor(private readonly organizations: OrganizationsService) {}

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
    if (this.byOrganization.size(organizationId) > KNOWLEDGE_WRITES_WAITING) {
      throw tooManyStreams(
        `This organization already has ${KNOWLEDGE_WRITES_WAITING} writes of documents waiting on this instance; retry when one ends`,
      );
    }
    return this.byOrganization.run(
      organizationId,
      async () => {
        const weight = typeof bytes === 'number' ? bytes : await bytes();
        signal?.throwIfAborted();
        if (weight < KNOWLEDGE_HEAVY_WRITE_BYTES) return write();
        return this.heavyWrite(organizationId, write, signal);
      },
      signal,
    );
  }

  /**
   * `write` once its account's earlier heavy write has ended and a heavy slot is free: one
   * deadline, KNOWLEDGE_HEAVY_WRITE_WAIT_MS, over both waits (429 past it), so a write of an
   * account's tenth organization waits no longer than one of its first.
   */
  private async heavyWrite<T>(
    organizationId: string,
    write: () => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const account = await this.organizations.accountOf(organizationId);
    // The monotonic clock, as the timers': a step of the wall clock moves no deadline.
    const until = performance.now() + KNOWLEDGE_HEAVY_WRITE_WAIT_MS;
    const inLine = new AbortController();
    const timer = setTimeout(
      () => inLine.abort(HEAVY_WAIT.tooLong()),
      KNOWLEDGE_HEAVY_WRITE_WAIT_MS,
    );
    const waiting = signal ? AbortSignal.any([signal, inLine.signal]) : inLine.signal;
    try {
      return await this.heavyByAccount.run(
        account,
        () => {
          clearTimeout(timer);
          // What is left of the deadline is the slot's to wait.
          const timeoutMs = Math.max(1, until - performance.now());
          return this.heavy.run({ ...HEAVY_WAIT, timeoutMs, signal }, write);
        },
        waiting,
      );
    } finally {
      clearTimeout(timer);
    }
  }

  /** The organization's writes running or waiting here (tests). */
  inFlight(organizationId: string): number {
    return this.byOrganization.size(organizationId);
  }
}
