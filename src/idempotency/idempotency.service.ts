import { Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { isUUID } from 'class-validator';
import { PinoLogger } from 'nestjs-pino';
import { AsyncLocalStorage } from 'node:async_hooks';
import type { EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { IdempotencyRepository, type ClaimRef, type KeyRef } from './idempotency.repository';
import { endUserOfAnswer, endUserSubject } from './end-user-answers';
import { withoutSecrets } from './replay-secrets';
import { ErasesEndUsers, ErasureOrder } from '../common/erasure/erasure-participant';

/** How long a key is kept (contract §16). */
export const IDEMPOTENCY_RETENTION_MS = 24 * 60 * 60 * 1000;
/**
 * How long a claim holds without renewal. The request renews it every third of it while it runs,
 * so only a request whose instance died loses its key, at most this long after its last renewal.
 */
export const IDEMPOTENCY_LEASE_MS = 30_000;
/** Claim attempts when the key vanishes between the claim and the read (released, purged). */
const CLAIM_ATTEMPTS = 3;

/** A request's hold on its key, from the claim until its answer is stored or given up. */
export class IdempotencyClaim implements ClaimRef {
  /** The answer is stored (or given up): nothing more to do for this key. */
  settled = false;
  /** The feature stored the answer in its own transaction (recordInTransaction). */
  recordedInTransaction = false;
  heartbeat: NodeJS.Timeout | undefined;
  /** The end user the key is about while it runs (end-user-answers.ts), once known. */
  subject: Buffer | null = null;
  /** The personality a reply speaks as, once known. */
  personalityId: string | null = null;

  constructor(
    readonly scopeType: KeyRef['scopeType'],
    readonly scopeId: string,
    readonly key: string,
    readonly requestId: string,
    /** Top-level fields of the answer that hold a secret shown once (replay-secrets.ts). */
    readonly secretFields: readonly string[],
    /**
     * The answer carries an end user's data (end-user-answers.ts): it is stored with their
     * subject; `endUserHint` is the request's `user_id` (path, then body), for answers that
     * do not name it.
     */
    readonly endUserData = false,
    readonly endUserHint?: string,
  ) {}
}

export type BeginResult =
  | { kind: 'claimed'; claim: IdempotencyClaim }
  | { kind: 'replay'; status: number; body: string | null };

/** The subject an answer is stored with: its end user's, on a route that carries their data. */
function subjectOf(claim: IdempotencyClaim, answer: unknown): Buffer | null {
  if (!claim.endUserData) return null;
  const userId = endUserOfAnswer(answer, claim.endUserHint);
  return userId === undefined ? null : endUserSubject(userId);
}

/**
 * Which answers are stored for replay: 2xx and the 4xx the work decided (Stripe's rule). Not
 * stored, so a retry runs afresh: 5xx; 429 and 402 `budget_exceeded` (try again later: once the
 * replies in flight settle, the budget is raised or the period resets; stored, the retry got the
 * old refusal for 24 hours, found by review); 409 `turn_not_pending` (another resumption holds
 * the turn, and gives it back if it fails: stored, the retry got the refusal while the turn
 * waited, found by review); 409 `conflict` (a race or a full queue: a webhook endpoint's 100
 * attempts pending, redeliveries made at once; stored, the retry got "try again" for 24 hours,
 * found by review); and 400 `validation_failed` / `malformed_json`, a request refused
 * before any work started, which the client may correct and send again under the same key.
 */
export function isStoredOutcome(status: number, code?: string): boolean {
  if (status >= 500 || status === 429) return false;
  if (code === 'budget_exceeded' || code === 'turn_not_pending' || code === 'conflict') {
    return false;
  }
  return code !== 'validation_failed' && code !== 'malformed_json';
}

/**
 * The rules of `Idempotency-Key` (contract §16, docs/idempotency.md): claim a key or learn what
 * it holds; store the answer once the work has committed; give the key up when the answer is not
 * to be stored. The interceptor calls it for every keyed POST; a feature whose work is a
 * database change may record the answer inside that change's transaction
 * (`recordInTransaction`), closing the gap between its commit and the key's.
 */
@Injectable()
export class IdempotencyService implements OnApplicationShutdown {
  /** The claim of the request being handled, for recordInTransaction. */
  private readonly current = new AsyncLocalStorage<IdempotencyClaim>();
  /** Claims whose lease this instance renews, until they settle or it shuts down. */
  private readonly renewed = new Set<IdempotencyClaim>();

  constructor(
    private readonly keys: IdempotencyRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(IdempotencyService.name);
  }

  /**
   * Claims the key for a new request, or answers what it holds: the stored answer (replay),
   * 409 `idempotency_key_in_progress` while its first request runs, 422 `idempotency_key_reused`
   * when it was used for another method, path or body.
   */
  async begin(
    ref: KeyRef,
    requestId: string,
    requestHash: Buffer,
    secretFields: readonly string[],
    endUser: { carriesData: boolean; hint?: string; personalityHint?: string } = {
      carriesData: false,
    },
  ): Promise<BeginResult> {
    // Known before the answer on a route about one end user: an erasure meanwhile finds the
    // claim and marks it erased (its answer is never stored; retries get 409), where a claim
    // without a subject kept the answer that outlived the erasure. A reply's personality is known
    // as early, for the personality's deletion (end-user-answers.step.ts).
    const about = {
      subject:
        endUser.carriesData && endUser.hint !== undefined ? endUserSubject(endUser.hint) : null,
      // Taken only as a UUID: the column's type, and the claims batched with it, would fail.
      personalityId:
        endUser.carriesData && endUser.personalityHint && isUUID(endUser.personalityHint)
          ? endUser.personalityHint
          : null,
    };
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const claim = new IdempotencyClaim(
        ref.scopeType,
        ref.scopeId,
        ref.key,
        requestId,
        secretFields,
        endUser.carriesData,
        endUser.hint,
      );
      claim.subject = about.subject;
      claim.personalityId = about.personalityId;
      if (
        await this.keys.insert(claim, requestHash, about, IDEMPOTENCY_LEASE_MS, this.clock.now())
      ) {
        this.keepAlive(claim);
        return { kind: 'claimed', claim };
      }
      const stored = await this.keys.find(ref, IDEMPOTENCY_RETENTION_MS, this.clock.now());
      if (!stored) continue; // released or purged meanwhile: insert again
      const sameRequest = stored.requestHash.equals(requestHash);
      if (
        stored.expired ||
        stored.forgotten ||
        (stored.responseStatus === null && stored.leaseLapsed && sameRequest)
      ) {
        const taken = await this.keys.takeOver(
          claim,
          requestHash,
          about,
          IDEMPOTENCY_LEASE_MS,
          IDEMPOTENCY_RETENTION_MS,
          this.clock.now(),
        );
        if (taken) {
          this.keepAlive(claim);
          return { kind: 'claimed', claim };
        }
        continue;
      }
      if (!sameRequest) {
        throw new AppError(
          'idempotency_key_reused',
          'This Idempotency-Key was used with another method, path or body',
        );
      }
      if (stored.responseStatus === null) break;
      return { kind: 'replay', status: stored.responseStatus, body: stored.responseBody };
    }
    throw keyInProgress();
  }

  /**
   * Whether a request holding the key runs now (its lease held, no answer yet): what a request
   * refused before its body is read (an import past its slots) answers instead, 409 as §16 says.
   */
  async isRunning(ref: KeyRef): Promise<boolean> {
    const stored = await this.keys.find(ref, IDEMPOTENCY_RETENTION_MS, this.clock.now());
    return (
      stored !== undefined &&
      stored.responseStatus === null &&
      !stored.expired &&
      !stored.forgotten &&
      !stored.leaseLapsed
    );
  }

  /** Runs `work` (the handler) with `claim` as the request's current claim. */
  runWithin<T>(claim: IdempotencyClaim, work: () => T): T {
    return this.current.run(claim, work);
  }

  /**
   * For a keyed request whose end user and personality are known only once it has read its turn
   * (a resumed one's): its key is about them from now on, before it writes, so that a memory or
   * fact of theirs, or the personality, deleted between that write and its stored answer is not
   * kept in the answer. Does nothing outside a keyed request on a route carrying an end user's
   * data, or when the key is about them already (a reply's, from its request).
   */
  async aboutTurn(turn: { userId: string; personalityId: string }): Promise<void> {
    const claim = this.current.getStore();
    if (!claim || claim.settled || !claim.endUserData) return;
    const subject = endUserSubject(turn.userId);
    if (claim.subject?.equals(subject) && claim.personalityId === turn.personalityId) return;
    await this.keys.setAbout(claim, { subject, personalityId: turn.personalityId });
    claim.subject = subject;
    claim.personalityId = turn.personalityId;
  }

  /**
   * For a feature whose work is a database change: stores the answer it is about to give in the
   * transaction of that change, so the key says "done" exactly when the work committed. Does
   * nothing outside a keyed request. The body is the value the handler will return; secret
   * fields are nulled as for any stored answer.
   */
  async recordInTransaction(manager: EntityManager, status: number, body: unknown): Promise<void> {
    const claim = this.current.getStore();
    if (!claim || claim.settled) return;
    await this.keys.completeWithin(
      manager,
      claim,
      { status, body: this.serialize(claim, body), subject: subjectOf(claim, body) },
      this.clock.now(),
    );
    claim.recordedInTransaction = true;
  }

  /** The handler answered `status` with `body`: stored, or the key given up. */
  async settleAnswer(claim: IdempotencyClaim, status: number, body: unknown): Promise<void> {
    if (claim.recordedInTransaction) return this.stop(claim);
    if (!isStoredOutcome(status)) return this.giveUp(claim);
    await this.store(claim, status, this.serialize(claim, body), subjectOf(claim, body));
  }

  /** The handler failed; `status`/`code`/`envelope` are what the client is answered. */
  async settleError(
    claim: IdempotencyClaim,
    status: number,
    code: string | undefined,
    envelope: unknown,
  ): Promise<void> {
    if (!isStoredOutcome(status, code)) return this.giveUp(claim);
    await this.store(claim, status, JSON.stringify(envelope), subjectOf(claim, undefined));
  }

  /**
   * For an answer sent as a stream: its work has committed and `body` is its final answer, so the
   * key is marked done now, before the final event is written and whether or not the client stays
   * to read it. Does nothing outside a keyed request.
   */
  async recordAnswer(status: number, body: unknown): Promise<void> {
    const claim = this.current.getStore();
    if (!claim || claim.settled) return;
    await this.store(claim, status, this.serialize(claim, body), subjectOf(claim, body));
  }

  /**
   * For an answer sent as a stream, once its producer has ended: the key is given up unless
   * recordAnswer() stored its answer. Called by the producer, not when the client leaves: a
   * client may leave while the work is still committing, and a retry must then find its answer.
   */
  async giveUpUnanswered(): Promise<void> {
    const claim = this.current.getStore();
    if (claim && !claim.settled) await this.giveUp(claim);
  }

  /**
   * In the transaction that erases end users (or deletes one of their memories): deletes the
   * stored answers about them (contract §25), so that a replay runs afresh instead of answering
   * their data from the store. `userIds` are the organization's `user_id`s.
   */
  // Last before the end_users row: every deletion locks the keys last (a memory's, a fact's, a
  // personality's), and an erasure locking them before the memories deadlocked with those; and
  // the keys stay locked only for the end of the erasure's transaction, not while it deletes
  // the memories (claims and answers of those keys, and their batches, wait on them).
  @ErasesEndUsers({ order: ErasureOrder.END_USERS - 1, tables: ['idempotency_keys'] })
  async forgetEndUsers(
    manager: EntityManager,
    endUsers: ReadonlyArray<{ organizationId: string; userId: string }>,
  ): Promise<void> {
    if (endUsers.length === 0) return;
    await this.keys.deleteAnswersAbout(
      manager,
      endUsers.map(({ organizationId, userId }) => ({
        organizationId,
        subject: endUserSubject(userId),
      })),
    );
  }

  /**
   * After a deletion of end users' data (a memory, a fact, a fact's old content) has
   * committed, its forgetEndUserAnswersStep again: a claim made while the deleting statement ran
   * (after its snapshot, say while it waited for a lock) is not in what the step saw, and its
   * request may have read the data before the deletion committed. Best effort: the deletion is
   * done and answered whatever this meets.
   */
  async forgetAfterDeletion(organizationId: string, userIds: readonly string[]): Promise<void> {
    if (userIds.length === 0) return;
    await this.keys.forgetAbout(organizationId, userIds).catch((error: unknown) => {
      this.logger.warn(
        { err: error },
        'could not mark the keys of requests begun during a deletion; their answers may be kept',
      );
    });
  }

  /**
   * In the transaction deleting a personality (which takes its conversations): the stored
   * answers of the replies it spoke are deleted, and those still running marked, so that a replay
   * runs afresh instead of answering a deleted conversation from the store.
   */
  async forgetPersonality(
    manager: EntityManager,
    organizationId: string,
    personalityId: string,
  ): Promise<void> {
    await this.keys.forgetPersonality(organizationId, personalityId, manager);
  }

  /**
   * The same once the deletion has committed, for the replies claimed while it ran (forgetAfterDeletion's
   * reason). Best effort: the deletion is done and answered whatever this meets.
   */
  async forgetPersonalityAfterDeletion(
    organizationId: string,
    personalityId: string,
  ): Promise<void> {
    await this.keys.forgetPersonality(organizationId, personalityId).catch((error: unknown) => {
      this.logger.warn(
        { err: error },
        "could not mark the keys of replies begun during a personality's deletion; their answers may be kept",
      );
    });
  }

  /** Gives the key up: the request's answer is not stored, and a retry runs afresh. */
  async giveUp(claim: IdempotencyClaim): Promise<void> {
    if (claim.settled) return;
    this.stop(claim);
    await this.keys.release(claim).catch((error: unknown) => {
      // The lease lapses by itself: the key is free again within IDEMPOTENCY_LEASE_MS.
      this.logger.warn({ err: error }, 'could not release an idempotency key');
    });
  }

  private async store(
    claim: IdempotencyClaim,
    status: number,
    body: string | null,
    subject: Buffer | null,
  ): Promise<void> {
    if (claim.settled) return;
    this.stop(claim);
    try {
      if (!(await this.keys.complete(claim, { status, body, subject }, this.clock.now()))) {
        this.logger.warn('an idempotency key was taken over before its answer was stored');
      }
    } catch (error) {
      // The work is done and is answered; the key, still "in progress", lapses with its lease
      // and a retry after that runs again (docs/idempotency.md, "What a crash leaves").
      this.logger.error({ err: error }, 'could not store the answer of an idempotency key');
    }
  }

  private serialize(claim: IdempotencyClaim, body: unknown): string | null {
    if (body === undefined || body === null) return null;
    return JSON.stringify(withoutSecrets(body, claim.secretFields));
  }

  /**
   * The requests have drained, and the database's pools are ending: a claim still unsettled
   * here (its request died with the instance) lapses with its lease, as a crashed instance's
   * does, instead of failing to renew every few seconds.
   */
  onApplicationShutdown(): void {
    for (const claim of this.renewed) clearInterval(claim.heartbeat);
    this.renewed.clear();
  }

  private keepAlive(claim: IdempotencyClaim): void {
    this.renewed.add(claim);
    claim.heartbeat = setInterval(() => {
      this.keys.renew(claim, IDEMPOTENCY_LEASE_MS, this.clock.now()).then(
        (held) => {
          if (!held) this.stopRenewing(claim);
        },
        (error: unknown) => this.logger.warn({ err: error }, 'could not renew an idempotency key'),
      );
    }, IDEMPOTENCY_LEASE_MS / 3);
    claim.heartbeat.unref();
  }

  private stop(claim: IdempotencyClaim): void {
    claim.settled = true;
    this.stopRenewing(claim);
  }

  private stopRenewing(claim: IdempotencyClaim): void {
    clearInterval(claim.heartbeat);
    this.renewed.delete(claim);
  }
}

/** 409 `idempotency_key_in_progress`: the key's first request has not answered yet. */
export function keyInProgress(): AppError {
  return new AppError(
    'idempotency_key_in_progress',
    'A request with this Idempotency-Key is still being processed; retry later',
    // The first request's answer is stored when it ends: a retry then gets it replayed.
    { headers: { 'Retry-After': '1' } },
  );
}
