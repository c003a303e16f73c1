import { Injectable } from '@nestjs/common';
import { tooManyStreams } from '../common/streams/stream-slots.service';

/** Writes of one organization that may wait on this instance behind the one running. */
export const KNOWLEDGE_WRITES_WAITING = 8;

interface Turns {
  /** The writes of the organization here: the one running and those waiting. */
  inFlight: number;
  /** Settles when the last write queued has ended. */
  last: Promise<void>;
}

/**
 * The organization's writes of documents on this instance, one at a time, each waiting its turn
 * here before it takes a database connection. Every write takes the organization's lock in the
 * database (KNOWLEDGE_MAX_BYTES) and a large one holds it for a second: waiting for it there, a
 * dozen writes of one organization held every pooled connection, and every other organization's
 * requests failed (found by review). Now at most one connection per instance waits on the lock,
 * for writes of the same organization on other instances. Past KNOWLEDGE_WRITES_WAITING writes
 * waiting, 429 `too_many_streams` with Retry-After, as an import past its slots.
 */
@Injectable()
export class KnowledgeWriteTurns {
  private readonly byOrganization = new Map<string, Turns>();

  async inTurn<T>(organizationId: string, write: () => Promise<T>): Promise<T> {
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
    try {
      await before;
      return await write();
    } finally {
      ended();
      turns.inFlight -= 1;
      if (turns.inFlight === 0) this.byOrganization.delete(organizationId);
    }
  }

  /** The organization's writes running or waiting here (tests). */
  inFlight(organizationId: string): number {
    return this.byOrganization.get(organizationId)?.inFlight ?? 0;
  }
}
