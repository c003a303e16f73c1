import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Batcher } from '../database/batcher';
import { Database } from '../database/database';
import { Columns, type RowOf } from '../database/columns';
import { sql } from '../database/sql';
import { forgetEndUserAnswersStep, forgetPersonalityAnswersStep } from './end-user-answers.step';
import type { IdempotencyKey, IdempotencyScopeType } from './entities/idempotency-key.entity';

/** Which key: the organization's (or the user's) key string. */
export interface KeyRef {
  scopeType: IdempotencyScopeType;
  scopeId: string;
  key: string;
}

/** A request's claim on a key: the lease is held by `requestId`. */
export interface ClaimRef extends KeyRef {
  requestId: string;
}

export interface StoredKey extends Pick<
  IdempotencyKey,
  'requestHash' | 'responseStatus' | 'responseBody'
> {
  /** Past retention: as good as absent. */
  expired: boolean;
  /** Still running, but its request stopped renewing the lease. */
  leaseLapsed: boolean;
  /**
   * Answered, but its answer forgotten (one of its end user's memories or facts was deleted
   * while it ran): as good as absent. This version deletes such a key as it completes it; an
   * instance of an earlier one, in a rolling deploy, stores the answer over the mark.
   */
  forgotten: boolean;
}

/**
 * What a running request is about, known before its answer: its end user (`subject`,
 * end-user-answers.ts) and, for a reply, the personality speaking. Deleting their data forgets
 * the key's answer (end-user-answers.step.ts).
 */
export interface ClaimAbout {
  subject: Buffer | null;
  personalityId: string | null;
}

/** An answer to store: status, JSON text, and the end user it is about (end-user-answers.ts). */
export interface StoredAnswer {
  status: number;
  body: string | null;
  subject: Buffer | null;
}

/**
 * Claims and answers batched per statement: at most 100 rows, one statement of each kind in
 * flight per instance, so that under load each carries every call that arrived meanwhile (two in
 * flight halved the batches and measured 0.77 of the unkeyed rate against 0.92 to 0.94). A key
 * can be locked by a deletion of its end user's data (forgetEndUserAnswersStep, until that
 * statement commits: milliseconds), or by an erasure or its personality's deletion (until its
 * transaction commits: for a busy personality, seconds). An answer batch skips such keys and
 * their answers go on to a second lane that waits for them, so that only they wait. A claim
 * meeting such a key (a retry of a request about the deleted data) still holds its batch up.
 */
const BATCHING = { maxBatch: 100, concurrency: 1 };

/** The holder of a key whose request's end user was erased while it ran: no request. */
const ERASED = 'erased';

interface NewClaim {
  claim: ClaimRef;
  requestHash: Buffer;
  /** What the request is about, known before its answer (see `insert`). */
  about: ClaimAbout;
  lockedUntil: Date;
  now: Date;
}

interface Answered {
  claim: ClaimRef;
  answer: StoredAnswer;
  at: Date;
}

const KEY = Columns.rowOf<IdempotencyKey>()('scopeType', 'scopeId', 'key');

type KeyRow = RowOf<typeof KEY>;

/** A key whose answer was stored (or, forgotten, deleted), and the request that held it. */
const SETTLED = Columns.rowOf<IdempotencyKey>('s')('scopeType', 'scopeId', 'key', 'lockedBy');

const keyOf = (ref: KeyRow | KeyRef) =>
  'scopeType' in ref
    ? `${ref.scopeType}\n${ref.scopeId}\n${ref.key}`
    : `${ref.scope_type}\n${ref.scope_id}\n${ref.key}`;

const compareKeys = (a: KeyRef, b: KeyRef) =>
  a.scopeType.localeCompare(b.scopeType) ||
  a.scopeId.localeCompare(b.scopeId) ||
  (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

/** When a lease taken or renewed at `now` for `leaseMs` runs out. */
const leaseEnd = (now: Date, leaseMs: number) => new Date(now.getTime() + leaseMs);
/** Keys created at or before this are past retention at `now`. */
const retentionCutoff = (now: Date, retentionMs: number) => new Date(now.getTime() - retentionMs);

/** The key as it stands, with whether it is past retention or its lease has lapsed at `now`. */
const storedAt = (now: Date, retentionMs: number) =>
  Columns.rowOf<IdempotencyKey>()('requestHash', 'responseStatus', 'responseBody').and(
    Columns.computed<{ expired: boolean; lease_lapsed: boolean; forgotten: boolean }>({
      expired: sql`created_at <= ${retentionCutoff(now, retentionMs)}`,
      lease_lapsed: sql`coalesce(locked_until < ${now}, false)`,
      forgotten: sql`answer_forgotten AND response_status IS NOT NULL`,
    }),
  );

const DELETED_COUNT = Columns.computed<{ count: number }>({ count: sql`count(*)::int` });

const whereClaimed = (claim: ClaimRef) =>
  sql`scope_type = ${claim.scopeType} AND scope_id = ${claim.scopeId} AND key = ${claim.key}
      AND locked_by = ${claim.requestId}`;

/**
 * The SQL of `idempotency_keys`. Every statement but `completeWithin` (which joins the caller's
 * transaction) is one round trip outside any transaction, committed asynchronously (Database's
 * `asyncCommit`): a keyed request makes two more commits than the work itself, and waiting for
 * two more WAL flushes would cost it far more than the statements do. What that can lose is
 * only what a crash between the work's commit and the key's can lose anyway
 * (docs/idempotency.md, "What a crash leaves"): a claim is made durable by the work's own
 * synchronous commit, which flushes the WAL before it; an answer or a release lost to a
 * PostgreSQL crash in the next fraction of a second leaves the key "in progress" until its
 * lease lapses. Times (creation, leases, retention) are the caller's Clock's, like every rule of
 * time (docs/database.md); instances are expected to keep their clocks in step (NTP), well within
 * a lease.
 */
@Injectable()
export class IdempotencyRepository {
  /**
   * Every keyed request makes one claim and stores one answer: under load, the claims (and the
   * answers) of concurrent requests go as one statement each (Batcher), rows in key order so
   * that two batches holding the same keys lock them in the same order.
   */
  private readonly claims = new Batcher(
    (inputs: readonly NewClaim[]) => this.insertAll(inputs),
    BATCHING,
  );
  private readonly answers = new Batcher(
    (inputs: readonly Answered[]) => this.completeUnlocked(inputs),
    BATCHING,
  );
  /** The answers whose keys another transaction held when their batch ran: they wait for it. */
  private readonly answersWaiting = new Batcher(
    (inputs: readonly Answered[]) => this.completeAll(inputs, { wait: true }),
    BATCHING,
  );

  constructor(private readonly database: Database) {}

  /** The claims' keys inserted, the first claim of a key in the batch winning it. */
  private async insertAll(inputs: readonly NewClaim[]): Promise<boolean[]> {
    const first = new Map<string, NewClaim>();
    for (const input of inputs) {
      if (!first.has(keyOf(input.claim))) first.set(keyOf(input.claim), input);
    }
    const rows = [...first.values()].sort((a, b) => compareKeys(a.claim, b.claim));
    const inserted = await this.database.rows(
      KEY.query`INSERT INTO idempotency_keys
            (scope_type, scope_id, key, request_hash, subject, personality_id, locked_by,
             locked_until, created_at)
          SELECT * FROM unnest(${rows.map((r) => r.claim.scopeType)}::text[],
                               ${rows.map((r) => r.claim.scopeId)}::uuid[],
                               ${rows.map((r) => r.claim.key)}::text[],
                               ${rows.map((r) => r.requestHash)}::bytea[],
                               ${rows.map((r) => r.about.subject)}::bytea[],
                               ${rows.map((r) => r.about.personalityId)}::uuid[],
                               ${rows.map((r) => r.claim.requestId)}::text[],
                               ${rows.map((r) => r.lockedUntil)}::timestamptz[],
                               ${rows.map((r) => r.now)}::timestamptz[])
          ON CONFLICT (scope_type, scope_id, key) DO NOTHING
          RETURNING ${KEY}`,
      { prepared: true, asyncCommit: true },
    );
    const won = new Set(inserted.map(keyOf));
    return inputs.map(
      (input) => won.has(keyOf(input.claim)) && first.get(keyOf(input.claim)) === input,
    );
  }

  /**
   * The batch's answers whose keys no other transaction holds, at once; the rest through
   * `answersWaiting`. A key not settled here is either held by another transaction or no longer
   * the claim's: the second lane tells which (rarely asked: a lease lost).
   */
  private async completeUnlocked(
    inputs: readonly Answered[],
  ): Promise<Array<boolean | Promise<boolean>>> {
    const settled = await this.completeAll(inputs, { wait: false });
    // Promises, not awaited: this batch ends now, and the next one runs while these wait.
    return inputs.map((input, index) => settled[index] || this.answersWaiting.submit(input));
  }

  /**
   * Whether each claim still held its key when its answer was stored; with `wait: false`, false
   * too for a key another transaction holds (SKIP LOCKED). The keys are locked first, in key
   * order, the order every statement locking several keys takes (end-user-answers.step.ts,
   * deleteAnswersAbout), whatever plan the update gets: no deadlock with a deletion or an erasure.
   * A key whose answer was forgotten while its request ran (answer_forgotten) is deleted rather
   * than answered: a retry runs afresh, on any instance.
   */
  private async completeAll(
    inputs: readonly Answered[],
    { wait }: { wait: boolean },
  ): Promise<boolean[]> {
    const rows = [...inputs].sort((a, b) => compareKeys(a.claim, b.claim));
    const settled = await this.database.rows(
      SETTLED.query`WITH answers AS (
            SELECT * FROM unnest(${rows.map((r) => r.claim.scopeType)}::text[],
                                 ${rows.map((r) => r.claim.scopeId)}::uuid[],
                                 ${rows.map((r) => r.claim.key)}::text[],
                                 ${rows.map((r) => r.claim.requestId)}::text[],
                                 ${rows.map((r) => r.answer.status)}::smallint[],
                                 ${rows.map((r) => r.answer.body)}::text[],
                                 ${rows.map((r) => r.answer.subject)}::bytea[],
                                 ${rows.map((r) => r.at)}::timestamptz[])
                   AS a(scope_type, scope_id, key, locked_by, status, body, subject, at)),
          held AS (
            SELECT k.scope_type, k.scope_id, k.key, k.locked_by, k.answer_forgotten
              FROM idempotency_keys k JOIN answers a
                ON k.scope_type = a.scope_type AND k.scope_id = a.scope_id AND k.key = a.key
               AND k.locked_by = a.locked_by
             ORDER BY k.scope_type, k.scope_id, k.key COLLATE "C"
             FOR UPDATE OF k ${wait ? sql`` : sql`SKIP LOCKED`}),
          forgotten AS (
            DELETE FROM idempotency_keys k USING held h
             WHERE k.scope_type = h.scope_type AND k.scope_id = h.scope_id AND k.key = h.key
               AND h.answer_forgotten
            RETURNING h.scope_type, h.scope_id, h.key, h.locked_by),
          stored AS (
            UPDATE idempotency_keys k
               SET response_status = a.status, response_body = a.body, subject = a.subject,
                   completed_at = a.at, locked_by = NULL, locked_until = NULL
              FROM held h JOIN answers a
                ON a.scope_type = h.scope_type AND a.scope_id = h.scope_id AND a.key = h.key
               AND a.locked_by = h.locked_by
             WHERE k.scope_type = h.scope_type AND k.scope_id = h.scope_id AND k.key = h.key
               AND NOT h.answer_forgotten
            RETURNING h.scope_type, h.scope_id, h.key, h.locked_by)
          SELECT ${SETTLED} FROM (SELECT * FROM stored UNION ALL SELECT * FROM forgotten) s`,
      { prepared: true, asyncCommit: true },
    );
    const held = new Set(settled.map((row) => `${keyOf(row)}\n${row.locked_by}`));
    return inputs.map((input) => held.has(`${keyOf(input.claim)}\n${input.claim.requestId}`));
  }

  /**
   * Claims a key no one holds, created at `now` and leased for `leaseMs`: true when it was new.
   * The common case, one INSERT shared with the claims made at the same moment (`claims`); an
   * existing key is not locked by it (a burst of retries does not queue on its row).
   */
  insert(
    claim: ClaimRef,
    requestHash: Buffer,
    about: ClaimAbout,
    leaseMs: number,
    now: Date,
  ): Promise<boolean> {
    return this.claims.submit({
      claim,
      requestHash,
      about,
      lockedUntil: leaseEnd(now, leaseMs),
      now,
    });
  }

  /**
   * Takes an existing key over, if it is past retention at `now`, its answer was forgotten, or its
   * first request (with this same request hash) stopped renewing its lease, a crashed instance.
   * The row lock lets one of several concurrent retries win; the others find it held again.
   */
  async takeOver(
    claim: ClaimRef,
    requestHash: Buffer,
    about: ClaimAbout,
    leaseMs: number,
    retentionMs: number,
    now: Date,
  ): Promise<boolean> {
    const taken = await this.database.count(
      sql`UPDATE idempotency_keys
             SET request_hash = ${requestHash}, subject = ${about.subject},
                 personality_id = ${about.personalityId}::uuid, locked_by = ${claim.requestId},
                 locked_until = ${leaseEnd(now, leaseMs)}, created_at = ${now},
                 response_status = NULL, response_body = NULL, completed_at = NULL,
                 answer_forgotten = false
           WHERE scope_type = ${claim.scopeType} AND scope_id = ${claim.scopeId}
             AND key = ${claim.key}
             AND (created_at <= ${retentionCutoff(now, retentionMs)}
                  OR (response_status IS NOT NULL AND answer_forgotten)
                  OR (response_status IS NULL AND locked_until < ${now}
                      AND request_hash = ${requestHash}))`,
      { prepared: true, asyncCommit: true },
    );
    return taken === 1;
  }

  /** The key as it stands, with whether it is past retention or its lease has lapsed at `now`. */
  async find(ref: KeyRef, retentionMs: number, now: Date): Promise<StoredKey | undefined> {
    const stored = storedAt(now, retentionMs);
    const row = await this.database.row(
      stored.query`SELECT ${stored}
            FROM idempotency_keys
           WHERE scope_type = ${ref.scopeType} AND scope_id = ${ref.scopeId} AND key = ${ref.key}`,
      { prepared: true, asyncCommit: true },
    );
    return row
      ? {
          requestHash: row.request_hash,
          responseStatus: row.response_status,
          responseBody: row.response_body,
          expired: row.expired,
          leaseLapsed: row.lease_lapsed,
          forgotten: row.forgotten,
        }
      : undefined;
  }

  /**
   * Stores the answer (completed at `at`) of the request holding the lease; false if it no
   * longer holds it. One UPDATE shared with the answers stored at the same moment (`answers`).
   * A key whose answer was forgotten meanwhile is deleted instead: a retry runs afresh.
   */
  complete(claim: ClaimRef, answer: StoredAnswer, at: Date): Promise<boolean> {
    return this.answers.submit({ claim, answer, at }).then((held) => held);
  }

  /** `complete`, inside the caller's transaction: the answer commits with the work or not at all. */
  async completeWithin(
    manager: EntityManager,
    claim: ClaimRef,
    answer: StoredAnswer,
    at: Date,
  ): Promise<void> {
    await this.database.count(completeStatement(claim, answer, at), { manager });
  }

  /**
   * In the caller's transaction (an erasure's): deletes the organizations' stored answers about
   * these subjects (end users). A key whose request still runs carries its subject from its
   * claim on; it is kept, in progress, but no longer its request's (`locked_by` = ERASED): that
   * request's answer, stored after, finds no key and is not kept, and a retry meanwhile still
   * gets 409 until the lease lapses, then runs afresh. The keys are read FOR UPDATE first, as in
   * end-user-answers.step.ts: an answer stored after this statement's snapshot is waited for and
   * deleted, not missed.
   */
  async deleteAnswersAbout(
    manager: EntityManager,
    about: ReadonlyArray<{ organizationId: string; subject: Buffer }>,
  ): Promise<void> {
    const erased = sql`SELECT * FROM unnest(${about.map((a) => a.organizationId)}::uuid[],
                                  ${about.map((a) => a.subject)}::bytea[]) AS d(scope_id, subject)`;
    await this.database.count(
      sql`WITH about AS (
            SELECT k.scope_id, k.key, k.response_status IS NULL AS running
              FROM idempotency_keys k JOIN (${erased}) d
                ON k.scope_type = 'organization' AND k.scope_id = d.scope_id
               AND k.subject = d.subject
             ORDER BY k.scope_id, k.key COLLATE "C"
             FOR UPDATE OF k),
          answered AS (
            DELETE FROM idempotency_keys k USING about a
             WHERE k.scope_type = 'organization' AND k.scope_id = a.scope_id AND k.key = a.key
               AND NOT a.running)
          UPDATE idempotency_keys k SET subject = NULL, locked_by = ${ERASED}
            FROM about a
           WHERE k.scope_type = 'organization' AND k.scope_id = a.scope_id AND k.key = a.key
             AND a.running`,
      { manager },
    );
  }

  /**
   * forgetEndUserAnswersStep alone, once the deletion that ran it has committed: for the claims
   * made after that statement's snapshot, whose requests may have read the data before it
   * committed (IdempotencyService.forgetAfterDeletion).
   */
  async forgetAbout(organizationId: string, userIds: readonly string[]): Promise<void> {
    await this.database.count(
      sql`WITH ${forgetEndUserAnswersStep('forgotten_answers', organizationId, userIds)}
          SELECT 1`,
    );
  }

  /**
   * forgetPersonalityAnswersStep: in the transaction deleting the personality (`manager`), then
   * alone once it has committed, for the claims made meanwhile.
   */
  async forgetPersonality(
    organizationId: string,
    personalityId: string,
    manager?: EntityManager,
  ): Promise<void> {
    await this.database.count(
      sql`WITH ${forgetPersonalityAnswersStep('forgotten_answers', organizationId, personalityId)}
          SELECT 1`,
      { manager },
    );
  }

  /**
   * What a running request is about, learnt once it has read its turn (a resumed one's): a
   * deletion of the end user's memories or facts, or of the personality, from now on marks the
   * key (end-user-answers.step.ts).
   */
  async setAbout(claim: ClaimRef, about: ClaimAbout): Promise<void> {
    await this.database.count(
      sql`UPDATE idempotency_keys
             SET subject = ${about.subject}, personality_id = ${about.personalityId}::uuid
           WHERE ${whereClaimed(claim)} AND response_status IS NULL`,
      { prepared: true, asyncCommit: true },
    );
  }

  /** Gives the key up (an answer that is not stored): the next request with it runs afresh. */
  async release(claim: ClaimRef): Promise<void> {
    await this.database.count(
      sql`DELETE FROM idempotency_keys WHERE ${whereClaimed(claim)} AND response_status IS NULL`,
      { prepared: true, asyncCommit: true },
    );
  }

  /** Extends the lease of a request still running to `now` + `leaseMs`; false if it no longer holds it. */
  async renew(claim: ClaimRef, leaseMs: number, now: Date): Promise<boolean> {
    const renewed = await this.database.count(
      sql`UPDATE idempotency_keys SET locked_until = ${leaseEnd(now, leaseMs)}
           WHERE ${whereClaimed(claim)} AND response_status IS NULL`,
      { prepared: true, asyncCommit: true },
    );
    return renewed === 1;
  }

  /**
   * Deletes up to `batchSize` keys past retention at `now` (none whose request still holds a
   * live lease), answering how many. SKIP LOCKED lets any number of instances purge at once
   * without waiting on each other or deleting a row twice; each batch is one short statement.
   */
  async deleteExpired(now: Date, retentionMs: number, batchSize: number): Promise<number> {
    const row = await this.database.row(
      DELETED_COUNT.query`WITH doomed AS (
            SELECT scope_type, scope_id, key FROM idempotency_keys
             WHERE created_at <= ${retentionCutoff(now, retentionMs)}
               AND (locked_until IS NULL OR locked_until < ${now})
             LIMIT ${batchSize}
             FOR UPDATE SKIP LOCKED),
          deleted AS (
            DELETE FROM idempotency_keys k USING doomed d
             WHERE k.scope_type = d.scope_type AND k.scope_id = d.scope_id AND k.key = d.key
            RETURNING 1)
          SELECT ${DELETED_COUNT} FROM deleted`,
      { asyncCommit: true },
    );
    return row?.count ?? 0;
  }
}

function completeStatement(claim: ClaimRef, answer: StoredAnswer, at: Date) {
  // As completeAll, for one key: deleted when its answer was forgotten meanwhile.
  return sql`WITH held AS (
                SELECT answer_forgotten FROM idempotency_keys WHERE ${whereClaimed(claim)}
                FOR UPDATE),
              forgotten AS (
                DELETE FROM idempotency_keys
                 WHERE ${whereClaimed(claim)} AND (SELECT answer_forgotten FROM held))
              UPDATE idempotency_keys
                SET response_status = ${answer.status}, response_body = ${answer.body},
                    subject = ${answer.subject}, completed_at = ${at},
                    locked_by = NULL, locked_until = NULL
              WHERE ${whereClaimed(claim)} AND NOT (SELECT answer_forgotten FROM held)`;
}
