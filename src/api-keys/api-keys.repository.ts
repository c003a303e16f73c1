import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { AuditStep } from '../audit/audit-event.step';
import type { UserCaller } from '../common/auth/caller';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { Columns, type RowOf } from '../database/columns';
import { cte, empty, type Sql, sql, withEntries } from '../database/sql';
import { managerMembership, stillManages } from '../users/manager-membership';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import type { ApiKey } from './entities/api-key.entity';
import { isoTime } from '../database/iso-time';

/** What the API shows of a key (toApiKeyResponse). */
const SHOWN = [
  'id',
  'name',
  'scopes',
  'prefix',
  'lastFour',
  'createdAt',
  'expiresAt',
  'lastUsedAt',
  'rateLimitRps',
  'rateLimitBurst',
  'createdByUserId',
  'createdByApiKeyId',
] as const;

/** A key as the API shows it, aliased to the entity's properties. */
const SHOWN_KEY = Columns.propertiesOf<ApiKey>()(...SHOWN);

/** The same columns unaliased, for a CTE whose rows the statement's SELECT aliases. */
const SHOWN_KEY_COLUMNS = Columns.rowOf<ApiKey>()(...SHOWN);

/** A key as shown, and its hash (every instance forgets its cached copy). */
const SHOWN_KEY_AND_HASH = SHOWN_KEY.and(Columns.propertiesOf<ApiKey>()('keyHash'));

/** What authenticating a key needs from its row. */
const CREDENTIAL = Columns.propertiesOf<ApiKey>()(
  'id',
  'organizationId',
  'scopes',
  'expiresAt',
  'rateLimitRps',
  'rateLimitBurst',
  'rateLimitBucketId',
);

/** What rolling a key carries over from the old one. */
const ROLLED = Columns.propertiesOf<ApiKey>()(
  'name',
  'scopes',
  'keyHash',
  'rateLimitRps',
  'rateLimitBurst',
  'rateLimitBucketId',
);

/** The hash of a revoked key: every instance forgets its cached copy. */
const KEY_HASH = Columns.rowOf<ApiKey>()('keyHash');

/** The `data` of an `api_key.created` webhook event, from the inserted row. */
const CREATED_WEBHOOK_DATA = sql`jsonb_build_object('id', id, 'name', name, 'scopes', scopes,
                                                    'expires_at', ${isoTime('expires_at')})`;
/** The `data` of an `api_key.revoked` webhook event, from the updated row. */
const REVOKED_WEBHOOK_DATA = sql`jsonb_build_object('id', id, 'name', name,
                                                    'revoked_at', ${isoTime('revoked_at')})`;

const KEY_ID = Columns.rowOf<ApiKey>()('id');

/** The maker of keys in a line no member began (made before creators were recorded). */
const NO_MAKER = '00000000-0000-0000-0000-000000000000';

/** The member's keys made on the day once this one is counted; null: refused. */
const MADE_TODAY = Columns.computed<{ keys: number | null }>({
  keys: sql`(SELECT keys FROM counted)`,
});

const KEY_ORGANIZATION = Columns.rowOf<ApiKey>()('organizationId');

const KEY_ID_PROPERTY = Columns.propertiesOf<ApiKey>()('id');

/** A key's expiry once brought forward: never null. */
const ENDS_AT = Columns.computed<{ endsAt: Date }>({ endsAt: sql`expires_at` });

export type ApiKeyRow = RowOf<typeof SHOWN_KEY>;

export type ApiKeyCredentialRow = RowOf<typeof CREDENTIAL>;

/** A key about to be stored: its hash and display parts, never the key itself. */
/**
 * A key to insert; made by a user, with the version of the access token that asks for it
 * (UserCaller.tokenVersion), checked under the lock on their row: a password reset committed
 * meanwhile makes nothing.
 */
export type NewApiKey = { creatorTokenVersion?: number } & Pick<
  ApiKey,
  | 'organizationId'
  | 'name'
  | 'scopes'
  | 'prefix'
  | 'lastFour'
  | 'keyHash'
  | 'createdByUserId'
  | 'createdByApiKeyId'
  | 'expiresAt'
  | 'rateLimitRps'
  | 'rateLimitBurst'
  | 'rateLimitBucketId'
>;

/**
 * The INSERT of a key. With `lock`, a locking statement first (`WITH … AS MATERIALIZED (…)`)
 * and the row only when that statement answered the row `lock.from` names: the key is made
 * only while what made it still may (insertKeyAt).
 */
function insertKey(key: NewApiKey, lock?: { with: Sql; from: Sql; expiresBy?: Sql }) {
  // LEAST ignores a null: the earlier of the two ends, or the one there is.
  const expiresAt = lock?.expiresBy
    ? sql`LEAST(${key.expiresAt}::timestamptz, ${lock.expiresBy})`
    : sql`${key.expiresAt}::timestamptz`;
  return sql`${lock?.with ?? empty}
    INSERT INTO api_keys
      (organization_id, name, scopes, prefix, last_four, key_hash, created_by_user_id,
       created_by_api_key_id, expires_at, rate_limit_rps, rate_limit_burst, rate_limit_bucket_id)
    SELECT ${key.organizationId}::uuid, ${key.name}, ${key.scopes}::text[], ${key.prefix},
           ${key.lastFour}, ${key.keyHash}::bytea, ${key.createdByUserId}::uuid,
           ${key.createdByApiKeyId}::uuid, ${expiresAt},
           ${key.rateLimitRps}::double precision, ${key.rateLimitBurst}::integer,
           ${key.rateLimitBucketId}::uuid
    ${lock?.from ?? empty}`;
}

/*
 * Locks on api_keys rows, and why they cannot deadlock.
 *
 * Removing or demoting a member revokes the keys the member made and the keys made by those,
 * down the line (revokeMadeBy). A key made through one of those keys at that moment must not
 * escape the walk: so a key made by a key takes FOR SHARE locks on its creator (checked live
 * under the lock) and on the root of its creator's line (the key a user made, where the line
 * starts: created_by_api_key_id IS NULL), and the revocation first locks every key the member
 * made (every root of the member's lines, live or not), and only then, in a statement of its own
 * (its snapshot taken once those locks are held), walks the lines and revokes. A creation that
 * locked a root first commits before the walk reads, which sees its key; one that comes later
 * waits for the revocation to commit, then finds its creator revoked and makes nothing.
 *
 * Every statement that locks more than one key row locks them in one order, by
 * RANK_ORDER: keys made by a user (roots) before keys made by keys, each by id. The creation
 * (root, then creator), the roll (the rolled key, the caller's root and the caller, together)
 * and the revocation (the member's roots, then the live keys of the walk, the roots among them
 * already held) all do; every other statement of api_keys locks one row (a revocation by id, a
 * rename, last_used_at) and waits for nothing else while holding it. Transactions that take
 * their row locks in one total order cannot wait for each other in a cycle. Memberships come
 * before every key in that order: the revocation locks the organization's memberships before
 * any key, and a key made or rolled by a user locks the user's membership (managerMembership)
 * before any key it locks. The webhook step's FOR KEY SHARE of endpoints conflicts with none of
 * these.
 */
const RANK_ORDER = sql`created_by_api_key_id IS NOT NULL, id`;

/** The keys up `keyId`'s line of creators, to the root: `WITH RECURSIVE line AS (…)`. */
function lineOf(keyId: string | null) {
  return sql`WITH RECURSIVE line AS (
      SELECT id, created_by_api_key_id FROM api_keys WHERE id = ${keyId}::uuid
      UNION
      SELECT k.id, k.created_by_api_key_id FROM api_keys k JOIN line l ON k.id = l.created_by_api_key_id)`;
}

/** A key that works at `at`: neither revoked nor expired. */
const liveAt = (at: Date) =>
  sql`revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${at}::timestamptz)`;

/**
 * What a key made by the live key `creatorId` (as of `at`) locks: its creator and the root of
 * the creator's line, FOR SHARE (see RANK_ORDER), the creator checked under the lock, so no row
 * is inserted when a concurrent revocation got there first. The new key ends no later than its
 * creator: a key's expiry is not escaped by the keys it makes.
 */
function creatorLock(organizationId: string, creatorId: string, at: Date) {
  return {
    with: sql`WITH creator AS MATERIALIZED (
      ${lineOf(creatorId)}
      SELECT id, expires_at FROM api_keys
       WHERE id IN (SELECT id FROM line WHERE id = ${creatorId}::uuid OR created_by_api_key_id IS NULL)
         AND organization_id = ${organizationId}
         AND (id <> ${creatorId}::uuid OR (${liveAt(at)}))
       ORDER BY ${RANK_ORDER}
         FOR SHARE)`,
    from: sql`FROM creator WHERE id = ${creatorId}::uuid`,
    expiresBy: sql`creator.expires_at`,
  };
}

/** The key as inserted: by a key or by a user, under the locks above. */
function insertKeyAt(key: NewApiKey, at: Date) {
  const { organizationId, createdByApiKeyId, createdByUserId } = key;
  if (createdByApiKeyId !== null) {
    return insertKey(key, creatorLock(organizationId, createdByApiKeyId, at));
  }
  if (createdByUserId !== null) {
    return insertKey(key, {
      with: sql`WITH manager AS MATERIALIZED (${managerMembership(
        organizationId,
        createdByUserId,
        key.creatorTokenVersion,
      )})`,
      from: sql`FROM manager`,
    });
  }
  return insertKey(key);
}

/**
 * The key inserted by `insertion`, its webhook event (first due at `at`) and, when `audit` is
 * given, its audit event, in one statement; answers the key as shown.
 */
function keyCreated(key: NewApiKey, insertion: Sql, at: Date, audit?: AuditStep) {
  const created = cte(
    'created',
    {
      audit_target_id: sql`id::text`,
      // As stored: a key made by a key ends no later than its maker, whatever was asked.
      audit_details: sql`jsonb_build_object('name', name, 'scopes', scopes, 'expires_at',
        ${isoTime('expires_at')})`,
      webhook_data: CREATED_WEBHOOK_DATA,
    },
    (lent) => sql`${insertion} RETURNING ${SHOWN_KEY_COLUMNS}, ${lent}`,
  );
  const webhook = webhookEventStep(created, {
    organizationId: key.organizationId,
    type: 'api_key.created',
    at,
  });
  const entries = audit ? [created, audit(created), webhook] : [created, webhook];
  return withEntries(entries, SHOWN_KEY.query`SELECT ${SHOWN_KEY} FROM ${created.ref}`);
}

/**
 * Every query of api_keys: the one-statement writes and the lookup on the authentication path on
 * the pool (one round trip, named so PostgreSQL plans them once), the rest in the caller's
 * transaction.
 */
@Injectable()
export class ApiKeysRepository {
  constructor(private readonly database: Database) {}

  /**
   * The key, its audit event and its webhook event (first due at `at`) in one statement, in the
   * caller's transaction (countMade's); undefined when the key it is made by (if any) no longer
   * works at `at`.
   */
  async insertAudited(
    manager: EntityManager,
    key: NewApiKey,
    audit: AuditStep,
    at: Date,
  ): Promise<ApiKeyRow | undefined> {
    return this.database.row(keyCreated(key, insertKeyAt(key, at), at, audit), {
      manager,
      prepared: true,
    });
  }

  /**
   * In the caller's transaction (a roll issues the new key with the old one's end), once
   * lockForRoll has locked and checked the key it is made by.
   */
  async insert(manager: EntityManager, key: NewApiKey, at: Date): Promise<ApiKeyRow> {
    const row = await this.database.row(keyCreated(key, insertKey(key), at), { manager });
    return row!;
  }

  /**
   * Counts a key made on `day` (UTC) in the lines of the member who makes it (`maker.userId`, by
   * their access token) or who began the line of the key that makes it (`maker.keyId`), unless
   * `max` were made there already: false when refused (nothing counted). The first lock of a
   * creation's or a roll's transaction, and one no other statement takes: the keys of a member's
   * lines are made one after another, and concurrent ones never pass `max` between them. The
   * member's rows before the day before go with it.
   */
  async countMade(
    manager: EntityManager,
    organizationId: string,
    maker: { userId: string } | { keyId: string },
    day: string,
    max: number,
  ): Promise<boolean> {
    const throughKey = 'keyId' in maker;
    // The member who began the key's line (its root's creator); a line from before creators were
    // recorded counts for no member.
    const madeBy =
      'keyId' in maker
        ? sql`${lineOf(maker.keyId)},
           made_by AS (SELECT COALESCE((SELECT created_by_user_id FROM api_keys
                                         WHERE id IN (SELECT id FROM line)
                                           AND created_by_api_key_id IS NULL
                                           AND organization_id = ${organizationId}),
                                       ${NO_MAKER}::uuid) AS id)`
        : sql`WITH made_by AS (SELECT ${maker.userId}::uuid AS id)`;
    const row = await this.database.row(
      MADE_TODAY.query`${madeBy},
           earlier AS (
             DELETE FROM api_key_daily_creations
              WHERE organization_id = ${organizationId}
                AND maker_id = (SELECT id FROM made_by) AND through_key = ${throughKey}
                AND day < ${day}::date - 1),
           counted AS (
             INSERT INTO api_key_daily_creations AS c
                    (organization_id, maker_id, through_key, day, keys)
             SELECT ${organizationId}, id, ${throughKey}, ${day}::date, 1 FROM made_by
             ON CONFLICT (organization_id, maker_id, through_key, day)
                DO UPDATE SET keys = c.keys + 1
              WHERE c.keys < ${max}::int
             RETURNING c.keys)
         SELECT ${MADE_TODAY}`,
      { manager },
    );
    return row?.keys != null;
  }

  /** Whether the user still manages the organization's keys (managerMembership, read now). */
  async stillManages(caller: UserCaller): Promise<boolean> {
    return (
      (await this.database.count(
        sql`SELECT 1 WHERE ${stillManages(caller, caller.organizationId)}`,
      )) > 0
    );
  }

  /**
   * For a roll by a user, before any key is locked: whether they are still an owner or admin of
   * the organization, their membership locked FOR SHARE until the transaction ends (see
   * managerMembership).
   */
  async lockManagerMembership(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    tokenVersion?: number,
  ): Promise<boolean> {
    const held = await this.database.count(
      managerMembership(organizationId, userId, tokenVersion),
      { manager },
    );
    return held > 0;
  }

  /**
   * For a roll of the organization's key `id` by the key `callerKeyId` (null: by a user): locks,
   * until the transaction ends, the rolled key (two concurrent rolls of one key run one after
   * the other), the caller's key and the root of its line (the new key is made by the caller's
   * key), all in one statement, in RANK_ORDER. Answers the rolled key when
   * it works at `now` (else undefined), and whether the caller's key does.
   */
  async lockForRoll(
    manager: EntityManager,
    id: string,
    organizationId: string,
    callerKeyId: string | null,
    now: Date,
  ): Promise<{
    rolled: RowOf<typeof ROLLED> | undefined;
    callerLive: boolean;
    callerExpiresAt: Date | null;
  }> {
    const locked = ROLLED.and(KEY_ID_PROPERTY).and(
      Columns.computed<{ live: boolean; expiresAt: Date | null }>({
        live: liveAt(now),
        expiresAt: sql`expires_at`,
      }),
    );
    const rows = await this.database.rows(
      locked.query`${lineOf(callerKeyId)}
          SELECT ${locked}
            FROM api_keys
           WHERE organization_id = ${organizationId}
             AND (id = ${id} OR id = ${callerKeyId}::uuid
                  OR id IN (SELECT id FROM line WHERE created_by_api_key_id IS NULL))
           ORDER BY ${RANK_ORDER}
           FOR NO KEY UPDATE`,
      { manager },
    );
    const rolled = rows.find((row) => row.id === id && row.live);
    const callerKey = rows.find((row) => row.id === callerKeyId);
    return {
      rolled,
      callerLive: callerKeyId === null || callerKey?.live === true,
      callerExpiresAt: callerKey?.expiresAt ?? null,
    };
  }

  /** Revokes the organization's key at `at`, with its webhook event (a roll that ends it at once). */
  async revokeAt(
    manager: EntityManager,
    id: string,
    organizationId: string,
    at: Date,
  ): Promise<void> {
    const revoked = cte(
      'revoked',
      { webhook_data: REVOKED_WEBHOOK_DATA },
      (lent) => sql`
        UPDATE api_keys SET revoked_at = ${at}
         WHERE id = ${id} AND organization_id = ${organizationId}
        RETURNING id, ${lent}`,
    );
    const entries = [
      revoked,
      webhookEventStep(revoked, { organizationId, type: 'api_key.revoked', at }),
    ];
    await this.database.count(withEntries(entries, sql`SELECT 1 FROM ${revoked.ref}`), {
      manager,
    });
  }

  /** Brings the key's expiry forward to `endsAt` unless it already expires sooner; answers it. */
  async expireBy(
    manager: EntityManager,
    id: string,
    organizationId: string,
    endsAt: Date,
  ): Promise<Date> {
    const row = await this.database.row(
      ENDS_AT.query`UPDATE api_keys SET expires_at = LEAST(coalesce(expires_at, 'infinity'), ${endsAt}::timestamptz)
           WHERE id = ${id} AND organization_id = ${organizationId} RETURNING ${ENDS_AT}`,
      { manager },
    );
    // The roll locked the key in its organization first: none here is not a client's error.
    if (!row) throw new Error(`API key ${id} not in organization ${organizationId}`);
    return row.endsAt;
  }

  /**
   * Revokes the organization's key at `at` and writes its audit and webhook events in one
   * statement; answers the key's hash, or undefined when it has no such live key.
   */
  async revokeAudited(
    id: string,
    organizationId: string,
    at: Date,
    audit: AuditStep,
    managing: Sql,
  ): Promise<Buffer | undefined> {
    const revoked = cte(
      'revoked',
      {
        audit_target_id: sql`id::text`,
        audit_details: sql`jsonb_build_object('name', name)`,
        webhook_data: REVOKED_WEBHOOK_DATA,
      },
      (lent) => sql`
        UPDATE api_keys SET revoked_at = ${at}
         WHERE id = ${id} AND organization_id = ${organizationId} AND revoked_at IS NULL
           AND ${managing}
        RETURNING ${KEY_HASH}, ${lent}`,
    );
    const entries = [
      revoked,
      audit(revoked),
      webhookEventStep(revoked, { organizationId, type: 'api_key.revoked', at }),
    ];
    const row = await this.database.row(
      withEntries(entries, KEY_HASH.query`SELECT ${KEY_HASH} FROM ${revoked.ref}`),
      { prepared: true },
    );
    return row?.key_hash;
  }

  /**
   * Revokes, at `at`, the organization's live keys that `userId` made, and the keys those keys
   * made, down the line (with `adminOnly`, only the keys holding the admin scope), writing each
   * one's audit and webhook events, in the caller's transaction; answers their hashes. A key
   * cannot grant scopes it lacks, so the admin keys down the line are all made by admin keys.
   *
   * Every key the user made, live or not, is locked first, in a statement of its own: a key made
   * by a key locks the root of its line (RANK_ORDER), so a creation through any key down the
   * user's lines has either committed before the walk below reads (and the walk sees its key),
   * or waits for this transaction and then finds its creator revoked. The walk, in the next
   * statement, reads a snapshot taken once those locks are held, and locks what it revokes in
   * RANK_ORDER.
   */
  async revokeMadeBy(
    manager: EntityManager,
    organizationId: string,
    userId: string,
    options: { adminOnly: boolean; reason: string },
    at: Date,
    audit: AuditStep,
  ): Promise<Buffer[]> {
    const roots = await this.database.rows(
      KEY_ID.query`SELECT ${KEY_ID} FROM api_keys
           WHERE organization_id = ${organizationId} AND created_by_user_id = ${userId}
           ORDER BY id
           FOR NO KEY UPDATE`,
      { manager },
    );
    // Every key down the user's lines descends from a key the user made.
    if (roots.length === 0) return [];
    // Through every key the user made, live or not: a key made by one revoked or expired since
    // is still the user's doing, and still works.
    const targets = sql`targets AS (
        WITH RECURSIVE made AS (
          SELECT id FROM api_keys
           WHERE organization_id = ${organizationId} AND created_by_user_id = ${userId}
          UNION
          SELECT k.id FROM api_keys k JOIN made m ON k.created_by_api_key_id = m.id
           WHERE k.organization_id = ${organizationId})
        SELECT id FROM api_keys
         WHERE id IN (SELECT id FROM made) AND ${liveAt(at)}
           AND (NOT ${options.adminOnly}::boolean OR 'admin' = ANY (scopes))
         ORDER BY ${RANK_ORDER}
           FOR NO KEY UPDATE)`;
    const revoked = cte(
      'revoked',
      {
        audit_target_id: sql`id::text`,
        audit_details: sql`jsonb_build_object('name', name, 'reason', ${options.reason}::text)`,
        webhook_data: REVOKED_WEBHOOK_DATA,
      },
      (lent) => sql`
        UPDATE api_keys SET revoked_at = ${at}
         WHERE id IN (SELECT id FROM targets) AND revoked_at IS NULL
        RETURNING ${KEY_HASH}, ${lent}`,
    );
    const entries = [
      targets,
      revoked,
      audit(revoked),
      webhookEventStep(revoked, { organizationId, type: 'api_key.revoked', at }),
    ];
    const rows = await this.database.rows(
      withEntries(entries, KEY_HASH.query`SELECT ${KEY_HASH} FROM ${revoked.ref}`),
      { manager },
    );
    return rows.map((row) => row.key_hash);
  }

  /**
   * The organizations, in id order, where `userId` is a member and made a key (live or not): an
   * organization that removed them and kept their keys decided so.
   */
  async organizationsWithKeysMadeBy(manager: EntityManager, userId: string): Promise<string[]> {
    const rows = await this.database.rows(
      KEY_ORGANIZATION.query`SELECT DISTINCT ${KEY_ORGANIZATION} FROM api_keys
           WHERE created_by_user_id = ${userId}
             AND organization_id IN (SELECT organization_id FROM memberships
                                      WHERE user_id = ${userId})
           ORDER BY organization_id`,
      { manager },
    );
    return rows.map((row) => row.organization_id);
  }

  /** Newest first, after the key `startingAfter` of the same organization; `limit + 1` rows. */
  findPageForOrganization(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<ApiKeyRow[]> {
    const page: Keyset = {
      table: 'api_keys',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'desc',
    };
    return this.database.rows(
      SHOWN_KEY.query`SELECT ${SHOWN_KEY} FROM api_keys
           WHERE organization_id = ${organizationId} AND revoked_at IS NULL AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
      { prepared: true },
    );
  }

  /** The unrevoked key with this hash (its expiry is for the caller to judge). */
  findUnrevokedByHash(keyHash: Buffer): Promise<ApiKeyCredentialRow | undefined> {
    return this.database.row(
      CREDENTIAL.query`SELECT ${CREDENTIAL}
            FROM api_keys WHERE key_hash = ${keyHash} AND revoked_at IS NULL`,
      { prepared: true },
    );
  }

  /**
   * Sets the organization's live key's own bucket (null: none); answers the key as shown and its
   * hash (every instance forgets its cached copy), or undefined when there is no such key.
   */
  async setRateLimit(
    id: string,
    organizationId: string,
    patch: { name?: string; rateLimit?: { rps: number; burst: number } | null },
    audit: AuditStep | null,
    managing: Sql,
  ): Promise<RowOf<typeof SHOWN_KEY_AND_HASH> | undefined> {
    const keep = patch.rateLimit === undefined;
    const updated = cte(
      'updated',
      {
        audit_target_id: sql`id::text`,
        // What the key is now called and allowed, as the PATCH left it.
        audit_details: sql`jsonb_build_object('name', name, 'rate_limit',
          CASE WHEN rate_limit_rps IS NULL THEN NULL
               ELSE jsonb_build_object('rps', rate_limit_rps, 'burst', rate_limit_burst) END)`,
      },
      (lent) => sql`UPDATE api_keys
             SET name = coalesce(${patch.name ?? null}::text, name),
                 rate_limit_rps = CASE WHEN ${keep}::boolean THEN rate_limit_rps
                                       ELSE ${patch.rateLimit?.rps ?? null}::double precision END,
                 rate_limit_burst = CASE WHEN ${keep}::boolean THEN rate_limit_burst
                                         ELSE ${patch.rateLimit?.burst ?? null}::integer END
           WHERE id = ${id} AND organization_id = ${organizationId} AND revoked_at IS NULL
             AND ${managing}
          RETURNING ${SHOWN_KEY_COLUMNS}, key_hash, ${lent}`,
    );
    return this.database.row(
      withEntries(
        audit ? [updated, audit(updated)] : [updated],
        SHOWN_KEY_AND_HASH.query`SELECT ${SHOWN_KEY_AND_HASH} FROM ${updated.ref}`,
      ),
    );
  }

  /** Sets last_used_at to `at` unless it was set within the minute before (another instance did). */
  async touchLastUsed(id: string, at: Date): Promise<void> {
    await this.database.count(
      sql`UPDATE api_keys SET last_used_at = ${at}
           WHERE id = ${id}
             AND (last_used_at IS NULL OR last_used_at < ${at}::timestamptz - interval '60 seconds')`,
      { prepared: true },
    );
  }
}
