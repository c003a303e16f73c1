import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { Cte, empty, type Sql, sql, withEntries } from '../database/sql';
import { makerOf } from '../organizations/organization-maker';
import { managerMembership } from '../users/manager-membership';
import { webhookEventStep } from './webhook-event.step';
import type { SubscribableEventType } from './webhook-event-types';
import type { WebhookDeliveryAttempt } from './entities/webhook-delivery-attempt.entity';
import type { WebhookEndpoint, WebhookEndpointStatus } from './entities/webhook-endpoint.entity';
import type { WebhookEvent } from './entities/webhook-event.entity';

/** A row's columns as a LEFT JOIN that matched nothing answers them. */
type Unmatched<R> = { [Column in keyof R]: null };

const ENDPOINT_COLUMNS = Columns.rowOf<WebhookEndpoint>()(
  'id',
  'url',
  'description',
  'events',
  'status',
  'disabledReason',
  'createdAt',
);

export type WebhookEndpointRow = RowOf<typeof ENDPOINT_COLUMNS>;

/** What the audit keeps of a deleted endpoint. */
const DELETED_ENDPOINT = Columns.rowOf<WebhookEndpoint>()('url', 'events');

/** An endpoint the service disabled for failing, as its organization's managers are told. */
const DISABLED_ENDPOINT = Columns.rowOf<WebhookEndpoint>()(
  'id',
  'organizationId',
  'url',
  'failingSince',
);

export type DisabledEndpointRow = RowOf<typeof DISABLED_ENDPOINT>;

/** An endpoint a password reset disabled (disableEndpointsTakenBack). */
const ENDPOINT_KEY = Columns.rowOf<WebhookEndpoint>()('id', 'organizationId');

const EVENT_ID = Columns.rowOf<WebhookEvent>()('id');

/** A delivery attempt as the API shows it; its columns qualified by `alias` when given. */
function attemptColumns(alias?: string) {
  return Columns.rowOf<WebhookDeliveryAttempt>(alias)(
    'id',
    'eventId',
    'eventType',
    'attempt',
    'status',
    'responseStatus',
    'error',
    'durationMs',
    'createdAt',
    'nextAttemptAt',
  );
}

const ATTEMPT_COLUMNS = attemptColumns();

export type DeliveryAttemptRow = RowOf<typeof ATTEMPT_COLUMNS>;

/**
 * A redelivery's answer: its endpoint's status and the attempt added, every column of which is
 * null when none was (the endpoint is disabled, or a concurrent redelivery took the number).
 */
const REDELIVERY_COLUMNS: Columns<
  { endpoint_status: WebhookEndpointStatus } & (DeliveryAttemptRow | Unmatched<DeliveryAttemptRow>)
> = Columns.computed<{ endpoint_status: WebhookEndpointStatus }>({
  endpoint_status: sql`s.endpoint_status`,
}).and(attemptColumns('r'));

/** A claimed attempt with what it takes to make it: its endpoint's and its event's columns. */
const CLAIMED_ATTEMPT = Columns.rowOf<WebhookDeliveryAttempt>('c')('id')
  .and(
    Columns.computed<{ lock_token: string }>({
      // Set by the claim.
      lock_token: sql`c.lock_token`,
    }),
  )
  .and(
    Columns.rowOf<WebhookDeliveryAttempt>('c')(
      'organizationId',
      'endpointId',
      'eventId',
      'eventType',
      'attempt',
    ),
  )
  .and(Columns.rowOf<WebhookEndpoint>('e')('url', 'secret'))
  .and(
    Columns.computed<{ endpoint_status: WebhookEndpointStatus }>({
      endpoint_status: sql`e.status`,
    }),
  )
  .and(Columns.rowOf<WebhookEvent>('ev')('data'))
  .and(Columns.computed<{ event_created_at: Date }>({ event_created_at: sql`ev.created_at` }))
  .and(
    Columns.computed<{ account: string }>({
      // Whose share the attempt takes (WebhookDeliveryWorker): its organization's maker.
      account: sql`oa.account`,
    }),
  );

export type ClaimedAttempt = RowOf<typeof CLAIMED_ATTEMPT>;

/** Where an attempt goes, as its endpoint says now. */
const DELIVERY_TARGET = Columns.rowOf<WebhookEndpoint>()('url', 'secret').and(
  Columns.computed<{ endpoint_status: WebhookEndpointStatus }>({ endpoint_status: sql`status` }),
);

export type DeliveryTarget = RowOf<typeof DELIVERY_TARGET>;

/** Where the next claim starts and what the caps held back: in every row of a claim's answer. */
const NEXT_CLAIM = Columns.computed<{
  next_cursor: string | null;
  held_back_endpoints: string[] | null;
  held_back_organizations: string[] | null;
  held_back_accounts: string[] | null;
}>({
  next_cursor: sql`next.next_cursor`,
  held_back_endpoints: sql`next.held_back_endpoints`,
  held_back_organizations: sql`next.held_back_organizations`,
  held_back_accounts: sql`next.held_back_accounts`,
});

/** A claim's answer: a claimed attempt a row, every column of which is null when it took none. */
const CLAIM_COLUMNS: Columns<
  RowOf<typeof NEXT_CLAIM> & (ClaimedAttempt | Unmatched<ClaimedAttempt>)
> = NEXT_CLAIM.and(CLAIMED_ATTEMPT);

/** What a statement deleting in batches answers: how many it deleted. */
const DELETED_COUNT = Columns.computed<{ count: number }>({ count: sql`count(*)::int` });

const PENDING_COUNT = Columns.computed<{ pending: number }>({ pending: sql`count(*)::int` });

/** Endpoint `e`'s status and its attempts pending, counted up to `upTo` (lockForManualAttempt). */
function manualAttemptRoom(upTo: number) {
  return Columns.computed<{ status: WebhookEndpointStatus; pending: number }>({
    status: sql`e.status`,
    pending: sql`(SELECT count(*)::int FROM (
                    SELECT FROM webhook_delivery_attempts a
                     WHERE a.endpoint_id = e.id AND a.status = 'pending'
                     LIMIT ${upTo}) p)`,
  });
}

export type ManualAttemptRoom = RowOf<ReturnType<typeof manualAttemptRoom>>;

/** What the claim is to respect: this instance's attempts in flight and the caps on them. */
export interface ClaimLimits {
  /** Attempts to claim at most (the instance's free slots). */
  limit: number;
  /** In flight per account (the organizations one user made), organization and endpoint, at most. */
  perAccount: number;
  perOrganization: number;
  perEndpoint: number;
  /** This instance's attempts in flight, by account, by organization and by endpoint. */
  busyAccounts: ReadonlyMap<string, number>;
  busyOrganizations: ReadonlyMap<string, number>;
  busyEndpoints: ReadonlyMap<string, number>;
  /** Endpoints visited at most; the next claim continues after `cursor` (null: from the first). */
  endpointsPerClaim: number;
  cursor: string | null;
}

export interface ClaimResult {
  attempts: ClaimedAttempt[];
  /** Where the next claim's visit of the endpoints starts. */
  cursor: string | null;
  /** Endpoints and organizations whose cap kept due attempts back in this claim. */
  heldBack: {
    endpoints: ReadonlySet<string>;
    organizations: ReadonlySet<string>;
    accounts: ReadonlySet<string>;
  };
}

/** What became of a claimed attempt. `retryInMs` set: the next attempt is scheduled then. */
export interface AttemptOutcome {
  id: string;
  lockToken: string;
  endpointId: string;
  status: 'succeeded' | 'failed';
  responseStatus: number | null;
  error: string | null;
  durationMs: number | null;
  retryInMs: number | null;
}

export interface EndpointChanges {
  url?: string;
  events?: string[];
  description?: string | null;
  status?: WebhookEndpointStatus;
}

/** Who points an endpoint where it sends: the user whose token did, or the key that did. */
export interface EndpointMaker {
  createdByUserId: string | null;
  createdByApiKeyId: string | null;
}

/** Attempt numbers a redelivery tries before answering 409 (insertRedelivery). */
const REDELIVERY_TRIES = 8;

/** The condition that `userId` is a member of the organization `organizationId` names. */
const stillAMemberOf = (organizationId: Sql, userId: string): Sql =>
  sql`EXISTS (SELECT FROM memberships ms
               WHERE ms.organization_id = ${organizationId} AND ms.user_id = ${userId})`;

/**
 * The SQL of outbound webhooks: endpoints, the event outbox and the delivery attempts. Every
 * time a rule reads (due, leased, retried at, past retention) is the caller's Clock's.
 */
@Injectable()
export class WebhooksRepository {
  constructor(private readonly database: Database) {}

  // ---------------------------------------------------------------- endpoints

  /**
   * For a write that makes an endpoint send somewhere (its creation, a new URL), in its
   * transaction before the write: true while the caller may still make one, and then held so
   * until the transaction ends. A user's membership as owner or admin with the token they asked
   * with (managerMembership: a password reset's FOR UPDATE of their row waits for the write, or
   * the write for the reset and then finds the token ended); an API key live, locked FOR SHARE
   * (a reset's or a removal's revocation locks it FOR NO KEY UPDATE first, or waits). So a
   * takeback, which reads the endpoints once its revocations hold their locks, sees every
   * endpoint made before it, and none is made after it (found by review: one made by a request
   * in flight at the reset escaped it).
   */
  async lockMaker(manager: EntityManager, caller: CallerContext, at: Date): Promise<boolean> {
    const held =
      caller.kind === 'user'
        ? managerMembership(caller.organizationId, caller.userId, caller.tokenVersion)
        : sql`SELECT 1 FROM api_keys
               WHERE id = ${caller.apiKeyId}::uuid AND organization_id = ${caller.organizationId}::uuid
                 AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ${at}::timestamptz)
                 FOR SHARE`;
    return (await this.database.count(held, { manager })) > 0;
  }

  /**
   * Adds an endpoint unless the organization already has `limit`; undefined then. The
   * organization's creates are serialized by a transaction-level advisory lock, taken in a
   * statement of its own so that the count after it sees every create committed before.
   */
  async insertEndpointWithin(
    manager: EntityManager,
    organizationId: string,
    limit: number,
    fields: EndpointMaker & {
      url: string;
      events: string[];
      description: string | null;
      secret: string;
    },
  ): Promise<WebhookEndpointRow | undefined> {
    await this.database.count(
      sql`SELECT pg_advisory_xact_lock(hashtextextended('webhook_endpoints:' || ${organizationId}, 0))`,
      { manager },
    );
    return this.database.row(
      ENDPOINT_COLUMNS.query`INSERT INTO webhook_endpoints (organization_id, url, events, description, secret,
                                       created_by_user_id, created_by_api_key_id)
          SELECT ${organizationId}::uuid, ${fields.url}, ${fields.events}::text[],
                 ${fields.description}, ${fields.secret}, ${fields.createdByUserId}::uuid,
                 ${fields.createdByApiKeyId}::uuid
           WHERE (SELECT count(*) FROM webhook_endpoints
                   WHERE organization_id = ${organizationId}) < ${limit}
          RETURNING ${ENDPOINT_COLUMNS}`,
      { manager },
    );
  }

  /** Oldest first (the order they were added), paged by the id of the last one seen. */
  findEndpointPage(
    organizationId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<WebhookEndpointRow[]> {
    const page: Keyset = {
      table: 'webhook_endpoints',
      cursor: startingAfter,
      scope: { organization_id: organizationId },
      order: 'asc',
    };
    return this.database.rows(
      ENDPOINT_COLUMNS.query`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
           WHERE organization_id = ${organizationId} AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  findEndpoint(organizationId: string, id: string): Promise<WebhookEndpointRow | undefined> {
    return this.database.row(
      ENDPOINT_COLUMNS.query`SELECT ${ENDPOINT_COLUMNS} FROM webhook_endpoints
           WHERE organization_id = ${organizationId} AND id = ${id}`,
    );
  }

  /**
   * Sets the given fields (and `updated_at` to `at`); answers the endpoint, or undefined when the
   * organization has none with this id.
   */
  updateEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
    changes: EndpointChanges,
    by: EndpointMaker,
    at: Date,
  ): Promise<WebhookEndpointRow | undefined> {
    const repointed = changes.url !== undefined;
    return this.database.row(
      ENDPOINT_COLUMNS.query`UPDATE webhook_endpoints
             SET url = CASE WHEN ${repointed}::boolean THEN ${changes.url ?? null}::text ELSE url END,
                 -- Who sends its events where they go now: a takeback ends what its user pointed.
                 created_by_user_id = CASE WHEN ${repointed}::boolean
                                           THEN ${by.createdByUserId}::uuid ELSE created_by_user_id END,
                 created_by_api_key_id = CASE WHEN ${repointed}::boolean
                                              THEN ${by.createdByApiKeyId}::uuid
                                              ELSE created_by_api_key_id END,
                 events = CASE WHEN ${changes.events !== undefined}::boolean
                               THEN ${changes.events ?? null}::text[] ELSE events END,
                 description = CASE WHEN ${changes.description !== undefined}::boolean
                                    THEN ${changes.description ?? null}::text ELSE description END,
                 status = CASE WHEN ${changes.status !== undefined}::boolean
                               THEN ${changes.status ?? null}::text ELSE status END,
                 -- The organization set the status: the service's reason is gone. A new status or
                 -- URL starts the failure clock over.
                 disabled_reason = CASE WHEN ${changes.status !== undefined}::boolean
                                        THEN NULL ELSE disabled_reason END,
                 failing_since = CASE WHEN ${changes.status !== undefined || changes.url !== undefined}::boolean
                                      THEN NULL ELSE failing_since END,
                 updated_at = ${at}
           WHERE organization_id = ${organizationId} AND id = ${id}
           RETURNING ${ENDPOINT_COLUMNS}`,
      { manager },
    );
  }

  /**
   * A disabled endpoint receives nothing: its pending attempts end as failed, with no next one.
   * (An attempt in flight at `now`, its lease held, finishes; recording it schedules no further
   * attempt.)
   */
  /**
   * The endpoint's URL, secret and status now, for an attempt claimed a while ago; undefined
   * when it was deleted meanwhile.
   */
  deliveryTarget(organizationId: string, endpointId: string): Promise<DeliveryTarget | undefined> {
    return this.database.row(
      DELIVERY_TARGET.query`SELECT ${DELIVERY_TARGET} FROM webhook_endpoints
           WHERE id = ${endpointId} AND organization_id = ${organizationId}`,
      { prepared: true },
    );
  }

  /**
   * Disables, as of `at`, the enabled endpoints a takeback ends (the status an organization sets:
   * no service reason, the failure clock stopped), and answers them: those of every organization
   * whose only member is the user, and those the user made in an organization they still belong
   * to, with their access token or through a key they made, down the line (keys revoked or
   * expired since included: their endpoints still deliver). An organization that removed them
   * (or that they left) keeps its endpoints, as it keeps the keys it chose to keep: a stranger's
   * reset does not
   * reach into it (found by review: a removed member's reset disabled its endpoints and failed
   * their pending deliveries). Each of the three is read by an index (the user's memberships,
   * the endpoints' creators, the keys' creators; LATERAL and OFFSET 0, so that a plan without
   * statistics cannot hash-join whole tables), then locked in id order, as disableFailing locks them: two
   * such statements never wait on each other crosswise.
   */
  disableEndpointsTakenBack(
    manager: EntityManager,
    userId: string,
    at: Date,
  ): Promise<Array<RowOf<typeof ENDPOINT_KEY>>> {
    return this.database.rows(
      ENDPOINT_KEY.query`WITH RECURSIVE made_keys AS (
             SELECT id FROM api_keys WHERE created_by_user_id = ${userId}
             UNION
             SELECT k.id FROM made_keys m
              CROSS JOIN LATERAL (SELECT id FROM api_keys
                                   WHERE created_by_api_key_id = m.id OFFSET 0) k),
           taken AS (
             SELECT e.id FROM memberships m
              CROSS JOIN LATERAL (SELECT id FROM webhook_endpoints
                                   WHERE organization_id = m.organization_id) e
              WHERE m.user_id = ${userId}
                AND NOT EXISTS (SELECT FROM memberships o
                                 WHERE o.organization_id = m.organization_id
                                   AND o.user_id <> ${userId})
             UNION
             SELECT e.id FROM webhook_endpoints e
              WHERE e.created_by_user_id = ${userId} AND ${stillAMemberOf(sql`e.organization_id`, userId)}
             UNION
             SELECT e.id FROM made_keys k
              CROSS JOIN LATERAL (SELECT id, organization_id FROM webhook_endpoints
                                   WHERE created_by_api_key_id = k.id OFFSET 0) e
              WHERE ${stillAMemberOf(sql`e.organization_id`, userId)}),
           locked AS (
             SELECT id FROM webhook_endpoints
              WHERE id = ANY (ARRAY(SELECT id FROM taken)) AND status = 'enabled'
              ORDER BY id
                FOR NO KEY UPDATE)
           UPDATE webhook_endpoints
              SET status = 'disabled', disabled_reason = NULL, failing_since = NULL, updated_at = ${at}
            WHERE id = ANY (ARRAY(SELECT id FROM locked)) AND status = 'enabled'
           RETURNING ${ENDPOINT_KEY}`,
      { manager },
    );
  }

  async cancelPendingAttempts(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
    now: Date,
  ): Promise<void> {
    await this.database.count(
      sql`UPDATE webhook_delivery_attempts
             SET status = 'failed', error = 'endpoint disabled', next_attempt_at = NULL
           WHERE organization_id = ${organizationId} AND endpoint_id = ${endpointId}
             AND status = 'pending' AND (locked_until IS NULL OR locked_until <= ${now})`,
      { manager },
    );
  }

  /**
   * Deletes the endpoint, its attempts with it (ON DELETE CASCADE); answers what the audit keeps
   * of it, or undefined when there was none.
   */
  async deleteEndpoint(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<RowOf<typeof DELETED_ENDPOINT> | undefined> {
    return this.database.row(
      DELETED_ENDPOINT.query`DELETE FROM webhook_endpoints
                              WHERE organization_id = ${organizationId} AND id = ${id}
                             RETURNING ${DELETED_ENDPOINT}`,
      { manager },
    );
  }

  // ---------------------------------------------------------------- the outbox

  /** One event, in the caller's transaction, first due at `at` (see webhook-event.step.ts). */
  async insertEvent(
    manager: EntityManager,
    organizationId: string,
    type: SubscribableEventType,
    data: Record<string, unknown>,
    at: Date,
  ): Promise<void> {
    const source = new Cte(
      'webhook_source',
      sql`SELECT ${JSON.stringify(data)}::jsonb AS webhook_data`,
      ['webhook_data'],
    );
    await this.database.count(
      withEntries([source, webhookEventStep(source, { organizationId, type, at })], sql`SELECT 1`),
      { manager },
    );
  }

  /**
   * A `ping` event for one endpoint only, if it is enabled, due at `at`; answers the event id
   * (or undefined).
   */
  async insertPing(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
    at: Date,
  ): Promise<string | undefined> {
    const row = await this.database.row(
      EVENT_ID.query`WITH endpoint AS (
            SELECT id FROM webhook_endpoints
             WHERE organization_id = ${organizationId} AND id = ${endpointId} AND status = 'enabled'
             FOR KEY SHARE),
          event AS (
            INSERT INTO webhook_events (organization_id, type, data, created_at)
            SELECT ${organizationId}::uuid, 'ping',
                   jsonb_build_object('webhook_endpoint_id', endpoint.id), ${at}::timestamptz
              FROM endpoint
            RETURNING id),
          attempt AS (
            INSERT INTO webhook_delivery_attempts
              (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at,
               created_at)
            SELECT ${organizationId}::uuid, ${endpointId}::uuid, event.id, 'ping', 1,
                   ${at}::timestamptz, ${at}::timestamptz
              FROM event)
          SELECT ${EVENT_ID} FROM event`,
      { manager },
    );
    return row?.id;
  }

  // ---------------------------------------------------------------- attempts

  /** Newest first, paged by the id of the last attempt seen. */
  findAttemptPage(
    organizationId: string,
    endpointId: string,
    limit: number,
    startingAfter: string | undefined,
  ): Promise<DeliveryAttemptRow[]> {
    const page: Keyset = {
      table: 'webhook_delivery_attempts',
      cursor: startingAfter,
      scope: { organization_id: organizationId, endpoint_id: endpointId },
      order: 'desc',
    };
    return this.database.rows(
      ATTEMPT_COLUMNS.query`SELECT ${ATTEMPT_COLUMNS}
            FROM webhook_delivery_attempts
           WHERE organization_id = ${organizationId} AND endpoint_id = ${endpointId}
             AND ${keysetAfter(page)}
           ORDER BY ${keysetOrder(page)}
           LIMIT ${limit + 1}`,
    );
  }

  /**
   * A new attempt of the event of delivery `deliveryId` to the endpoint `endpointId`, due at
   * `at`, numbered after the event's last attempt to that endpoint (the worker's retry schedule
   * goes on from it, while WEBHOOK_MAX_ATTEMPTS allows). Answers `not_found` when the
   * organization's endpoint has no such delivery, `disabled` when the endpoint is disabled (no
   * attempt is added), or the new attempt. A redelivery racing another for the same number
   * (unique (event, endpoint, attempt)) takes the next one: the statement runs again, in the
   * caller's transaction, and sees the winner's row.
   */
  async insertRedelivery(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
    deliveryId: string,
    at: Date,
  ): Promise<DeliveryAttemptRow | 'not_found' | 'disabled'> {
    // A try loses only to a concurrent redelivery of the same event that committed the number it
    // chose; each loss sees that row, so losing this many times in a row means a storm of them.
    for (let tries = 0; tries < REDELIVERY_TRIES; tries++) {
      const row = await this.database.row(
        REDELIVERY_COLUMNS.query`WITH source AS (
              SELECT a.event_id, a.event_type, e.status AS endpoint_status
                FROM webhook_delivery_attempts a
                JOIN webhook_endpoints e
                  ON e.id = a.endpoint_id AND e.organization_id = a.organization_id
                JOIN webhook_events ev ON ev.id = a.event_id
               WHERE a.organization_id = ${organizationId} AND a.endpoint_id = ${endpointId}
                 AND a.id = ${deliveryId}
                 -- An endpoint being deleted, or an event being purged, is waited for, then not
                 -- found: no attempt of it.
                 FOR KEY SHARE OF e, ev),
            redelivery AS (
              INSERT INTO webhook_delivery_attempts
                (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at,
                 created_at)
              SELECT ${organizationId}::uuid, ${endpointId}::uuid, s.event_id, s.event_type,
                     (SELECT max(m.attempt) FROM webhook_delivery_attempts m
                       WHERE m.event_id = s.event_id AND m.endpoint_id = ${endpointId}) + 1,
                     ${at}::timestamptz, ${at}::timestamptz
                FROM source s WHERE s.endpoint_status = 'enabled'
              ON CONFLICT DO NOTHING
              RETURNING ${ATTEMPT_COLUMNS})
            SELECT ${REDELIVERY_COLUMNS} FROM source s LEFT JOIN redelivery r ON true`,
        { manager, prepared: true },
      );
      if (!row) return 'not_found';
      if (row.endpoint_status !== 'enabled') return 'disabled';
      if (row.id) return row;
    }
    throw new AppError(
      'conflict',
      'Other redeliveries of this delivery were being made at the same time; try again',
    );
  }

  /**
   * Claims attempts due at `now` for this instance, fairly, in one short statement (its own
   * transaction), and answers them with the cursor the next claim starts after:
   *
   * 1. Endpoints with pending attempts are visited in id order from `cursor`, wrapping around,
   *    `endpointsPerClaim` at most (two index probes each, however deep a queue is), so successive
   *    claims go round every endpoint.
   * 2. Of each endpoint, its oldest due attempts, as many as its free slots on this instance
   *    (`perEndpoint` minus its attempts in flight here).
   * 3. Of each organization, as many as its free slots (`perOrganization` minus its attempts in
   *    flight here), its endpoints taking turns; of each account (the organizations one user
   *    made), as many as its free slots (`perAccount`), its organizations taking turns; then
   *    round-robin across accounts (every account's first, then every account's second…),
   *    `limit` in all. The endpoints, organizations and accounts whose cap kept due attempts
   *    back are answered too: a slot of theirs that frees is worth an immediate claim.
   * 4. FOR UPDATE SKIP LOCKED: instances claim side by side without waiting or taking the same
   *    row; the lease (`locked_until`, `now` + `leaseMs`) keeps the row from every other instance
   *    until the outcome is recorded, or until the lease runs out because this instance died.
   *
   * An account whose endpoints hang, in however many organizations, thus holds at most
   * `perAccount` of an instance's slots, and an event of another waits for no queue but its
   * own: per organization alone, one user's nine organizations held all 64 (found by review).
   */
  async claimDue(
    limits: ClaimLimits,
    leaseMs: number,
    lockToken: string,
    now: Date,
  ): Promise<ClaimResult> {
    // The first endpoint with a pending attempt (after one): an index probe.
    const firstPending = (after?: Sql) =>
      sql`SELECT endpoint_id FROM webhook_delivery_attempts
           WHERE status = 'pending' ${after ? sql`AND endpoint_id > ${after}` : empty}
           ORDER BY endpoint_id LIMIT 1`;
    const rows = await this.database.rows(
      CLAIM_COLUMNS.query`WITH RECURSIVE
          busy_account AS (
            SELECT * FROM unnest(${[...limits.busyAccounts.keys()]}::text[],
                                 ${[...limits.busyAccounts.values()]}::int[])
                     AS b(account, in_flight)),
          busy_organization AS (
            SELECT * FROM unnest(${[...limits.busyOrganizations.keys()]}::uuid[],
                                 ${[...limits.busyOrganizations.values()]}::int[])
                     AS b(organization_id, in_flight)),
          busy_endpoint AS (
            SELECT * FROM unnest(${[...limits.busyEndpoints.keys()]}::uuid[],
                                 ${[...limits.busyEndpoints.values()]}::int[])
                     AS b(endpoint_id, in_flight)),
          -- From the cursor to the last endpoint, then from the first one up to the cursor.
          after_cursor(endpoint_id, n) AS (
            SELECT (${firstPending(sql`${limits.cursor}::uuid`)}), 1
             WHERE ${limits.cursor}::uuid IS NOT NULL
            UNION ALL
            SELECT (${firstPending(sql`a.endpoint_id`)}), a.n + 1
              FROM after_cursor a
             WHERE a.endpoint_id IS NOT NULL AND a.n < ${limits.endpointsPerClaim}),
          from_first(endpoint_id, n) AS (
            SELECT (${firstPending()}), 1
            UNION ALL
            SELECT (${firstPending(sql`f.endpoint_id`)}), f.n + 1
              FROM from_first f
             WHERE f.endpoint_id IS NOT NULL
               AND (${limits.cursor}::uuid IS NULL OR f.endpoint_id < ${limits.cursor}::uuid)
               AND f.n < ${limits.endpointsPerClaim}),
          visited AS (
            SELECT endpoint_id, row_number() OVER (ORDER BY lap, n) AS visit FROM (
              SELECT endpoint_id, 0 AS lap, n FROM after_cursor WHERE endpoint_id IS NOT NULL
              UNION ALL
              SELECT endpoint_id, 1 AS lap, n FROM from_first
               WHERE endpoint_id IS NOT NULL
                 AND (${limits.cursor}::uuid IS NULL OR endpoint_id <= ${limits.cursor}::uuid)) v
            ORDER BY lap, n
            LIMIT ${limits.endpointsPerClaim}),
          -- Of each endpoint visited, its oldest due attempts: as many as its free slots, and
          -- one more (not taken) to tell whether the cap left work behind.
          endpoint_slot AS (
            SELECT v.endpoint_id,
                   greatest(0, ${limits.perEndpoint}::int - coalesce(b.in_flight, 0)) AS free
              FROM visited v LEFT JOIN busy_endpoint b ON b.endpoint_id = v.endpoint_id),
          candidate AS (
            SELECT d.id, d.organization_id, d.endpoint_id, d.next_attempt_at, s.free,
                   row_number() OVER (PARTITION BY d.endpoint_id
                                      ORDER BY d.next_attempt_at, d.id) AS endpoint_turn
              FROM endpoint_slot s
              CROSS JOIN LATERAL (
                SELECT a.id, a.organization_id, a.endpoint_id, a.next_attempt_at
                  FROM webhook_delivery_attempts a
                 WHERE a.endpoint_id = s.endpoint_id AND a.status = 'pending'
                   AND a.next_attempt_at <= ${now}
                   AND (a.locked_until IS NULL OR a.locked_until <= ${now})
                 ORDER BY a.next_attempt_at
                 LIMIT s.free + 1) d),
          ranked AS (
            SELECT c.id, c.organization_id, c.next_attempt_at,
                   row_number() OVER (PARTITION BY c.organization_id
                                      ORDER BY c.endpoint_turn, c.next_attempt_at, c.id) AS turn
              FROM candidate c WHERE c.endpoint_turn <= c.free),
          -- The account of each organization with candidates: read once per organization.
          organization_account AS MATERIALIZED (
            SELECT o.id AS organization_id, coalesce(${makerOf('o')}, o.id)::text AS account
              FROM organizations o
             WHERE o.id IN (SELECT DISTINCT organization_id FROM ranked)),
          -- Within its organization's free slots, each candidate's turn in its account.
          account_ranked AS (
            SELECT r.id, r.organization_id, r.next_attempt_at, a.account,
                   row_number() OVER (PARTITION BY a.account
                                      ORDER BY r.turn, r.next_attempt_at, r.id) AS account_turn
              FROM ranked r
              JOIN organization_account a ON a.organization_id = r.organization_id
              LEFT JOIN busy_organization b ON b.organization_id = r.organization_id
             WHERE r.turn <= ${limits.perOrganization}::int - coalesce(b.in_flight, 0)),
          chosen AS (
            SELECT r.id FROM account_ranked r
              LEFT JOIN busy_account b ON b.account = r.account
             WHERE r.account_turn <= ${limits.perAccount}::int - coalesce(b.in_flight, 0)
             ORDER BY r.account_turn, r.next_attempt_at
             LIMIT ${limits.limit}),
          -- Due work a cap kept back: a slot freed there is worth claiming again at once.
          -- Each level's own cap only: an organization cut by its account's cap alone is not
          -- held back by its own, and waking for it claimed one attempt per attempt that ended
          -- (review of the change).
          held_back AS (
            SELECT array_agg(DISTINCT endpoint_id) FILTER (WHERE endpoint_turn > free)
                     AS endpoints
              FROM candidate),
          held_back_organization AS (
            SELECT array_agg(DISTINCT r.organization_id) AS organizations
              FROM ranked r
              LEFT JOIN busy_organization b ON b.organization_id = r.organization_id
             WHERE r.turn > ${limits.perOrganization}::int - coalesce(b.in_flight, 0)),
          held_back_account AS (
            SELECT array_agg(DISTINCT r.account) AS accounts
              FROM account_ranked r
              LEFT JOIN busy_account b ON b.account = r.account
             WHERE r.account_turn > ${limits.perAccount}::int - coalesce(b.in_flight, 0)),
          due AS (
            SELECT a.id FROM webhook_delivery_attempts a
             WHERE a.id IN (SELECT id FROM chosen) AND a.status = 'pending'
               AND (a.locked_until IS NULL OR a.locked_until <= ${now})
             FOR UPDATE SKIP LOCKED),
          claimed AS (
            UPDATE webhook_delivery_attempts a
               SET locked_until = ${now}::timestamptz + ${leaseMs} * interval '1 millisecond',
                   lock_token = ${lockToken}
              FROM due WHERE a.id = due.id
            RETURNING a.id, a.lock_token, a.organization_id, a.endpoint_id, a.event_id,
                      a.event_type, a.attempt),
          -- Where the next claim starts: after the last endpoint visited, if the visit was cut
          -- short; from the first otherwise.
          next AS (
            SELECT CASE WHEN count(*) >= ${limits.endpointsPerClaim}
                        THEN (SELECT endpoint_id FROM visited ORDER BY visit DESC LIMIT 1) END
                     AS next_cursor,
                   (SELECT endpoints FROM held_back) AS held_back_endpoints,
                   (SELECT organizations FROM held_back_organization) AS held_back_organizations,
                   (SELECT accounts FROM held_back_account) AS held_back_accounts
              FROM visited)
          SELECT ${CLAIM_COLUMNS}
            FROM next
            LEFT JOIN (claimed c
              JOIN webhook_endpoints e ON e.id = c.endpoint_id AND e.organization_id = c.organization_id
              JOIN webhook_events ev ON ev.id = c.event_id AND ev.organization_id = c.organization_id
              JOIN organization_account oa ON oa.organization_id = c.organization_id)
              ON true`,
      { prepared: true },
    );
    return {
      attempts: rows.filter((row) => row.id !== null),
      cursor: rows[0]?.next_cursor ?? null,
      heldBack: {
        endpoints: new Set(rows[0]?.held_back_endpoints ?? []),
        organizations: new Set(rows[0]?.held_back_organizations ?? []),
        accounts: new Set(rows[0]?.held_back_accounts ?? []),
      },
    };
  }

  /**
   * Records outcomes in one statement: each attempt still held with its token becomes succeeded
   * or failed, and a failed one with `retryInMs` gets its next attempt, pending, due that long
   * after `now`, in the same statement. An attempt whose lease was lost (this instance was too
   * slow and another took it over) is left alone: only the holder of the current token records
   * an outcome. Each endpoint's `failing_since` follows: set to `now` by a failure when unset,
   * cleared by a success (written only when it changes).
   *
   * The endpoints are locked first, in id order, then their attempts: the order of a DELETE of
   * an endpoint (its row, then its attempts by cascade), of a PATCH, and of disableFailing (id
   * order too). Locking the attempts first, as the statement alone does, deadlocked with a
   * DELETE (the new attempt's foreign key waits for the endpoint the DELETE holds, the DELETE for
   * the attempt): PostgreSQL then aborted one, the DELETE's 500 or the whole batch, sent again
   * after its lease. The price: a transaction of two statements, and a row lock written on each
   * endpoint of the batch.
   */
  async recordOutcomes(outcomes: AttemptOutcome[], now: Date): Promise<void> {
    const endpointIds = [...new Set(outcomes.map((o) => o.endpointId))].sort();
    await this.database.transaction(async (manager) => {
      await this.database.count(
        sql`SELECT 1 FROM webhook_endpoints WHERE id = ANY(${endpointIds}::uuid[])
             ORDER BY id FOR NO KEY UPDATE`,
        { manager, prepared: true },
      );
      await this.recordLocked(manager, outcomes, now);
    });
  }

  private async recordLocked(
    manager: EntityManager,
    outcomes: AttemptOutcome[],
    now: Date,
  ): Promise<void> {
    await this.database.count(
      sql`WITH outcome AS (
            SELECT * FROM unnest(${outcomes.map((o) => o.id)}::uuid[],
                                 ${outcomes.map((o) => o.lockToken)}::uuid[],
                                 ${outcomes.map((o) => o.status)}::text[],
                                 ${outcomes.map((o) => o.responseStatus)}::int[],
                                 ${outcomes.map((o) => o.error)}::text[],
                                 ${outcomes.map((o) => o.durationMs)}::int[],
                                 ${outcomes.map((o) => o.retryInMs)}::int[])
                     AS o(id, lock_token, status, response_status, error, duration_ms, retry_ms)),
          done AS (
            UPDATE webhook_delivery_attempts a
               SET status = o.status, response_status = o.response_status, error = o.error,
                   duration_ms = o.duration_ms,
                   -- An endpoint disabled meanwhile gets no further attempt.
                   next_attempt_at = CASE WHEN e.status = 'enabled'
                                     THEN ${now}::timestamptz + o.retry_ms * interval '1 millisecond' END,
                   locked_until = NULL, lock_token = NULL
              FROM outcome o, webhook_endpoints e
             WHERE a.id = o.id AND a.lock_token = o.lock_token AND a.status = 'pending'
               AND e.id = a.endpoint_id AND e.organization_id = a.organization_id
            RETURNING a.organization_id, a.endpoint_id, a.event_id, a.event_type, a.attempt,
                      a.next_attempt_at, a.status, e.status AS endpoint_status),
          failing AS (
            UPDATE webhook_endpoints e
               SET failing_since = CASE WHEN d.succeeded THEN NULL
                                        ELSE coalesce(e.failing_since, ${now}::timestamptz) END
              FROM (SELECT endpoint_id, bool_or(status = 'succeeded') AS succeeded
                      FROM done WHERE endpoint_status = 'enabled' GROUP BY endpoint_id) d
             WHERE e.id = d.endpoint_id
               AND (CASE WHEN d.succeeded THEN e.failing_since IS NOT NULL
                         ELSE e.failing_since IS NULL END))
          INSERT INTO webhook_delivery_attempts
            (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at,
             created_at)
          SELECT organization_id, endpoint_id, event_id, event_type, attempt + 1, next_attempt_at,
                 ${now}::timestamptz
            FROM done WHERE next_attempt_at IS NOT NULL
          ON CONFLICT DO NOTHING`,
      { manager, prepared: true },
    );
  }

  /**
   * Disables, at `now`, every enabled endpoint whose attempts have all failed since `cutoff` or
   * earlier (reason `failing`), and ends their pending attempts as a disabling by the
   * organization does; answers the endpoints disabled. One statement: of instances running it
   * at once, each endpoint is answered to one only.
   */
  disableFailing(cutoff: Date, now: Date): Promise<DisabledEndpointRow[]> {
    return this.database.rows(
      DISABLED_ENDPOINT.query`WITH due AS (
            -- Locked in id order, as the recorder locks its endpoints (recordOutcomes).
            SELECT id AS due_id FROM webhook_endpoints
             WHERE status = 'enabled' AND failing_since <= ${cutoff}
             ORDER BY id FOR NO KEY UPDATE),
          disabled AS (
            UPDATE webhook_endpoints
               SET status = 'disabled', disabled_reason = 'failing', updated_at = ${now}
              FROM due
             WHERE id = due_id AND status = 'enabled'
            RETURNING ${DISABLED_ENDPOINT}),
          cancelled AS (
            UPDATE webhook_delivery_attempts a
               SET status = 'failed', error = 'endpoint disabled', next_attempt_at = NULL
              FROM disabled d
             WHERE a.endpoint_id = d.id AND a.status = 'pending'
               AND (a.locked_until IS NULL OR a.locked_until <= ${now}))
          SELECT ${DISABLED_ENDPOINT} FROM disabled`,
    );
  }

  /** Gives claimed attempts back (shutdown): due again at once, for any instance. */
  async release(attempts: Array<{ id: string; lockToken: string }>): Promise<void> {
    await this.database.count(
      sql`UPDATE webhook_delivery_attempts a SET locked_until = NULL, lock_token = NULL
            FROM unnest(${attempts.map((a) => a.id)}::uuid[],
                        ${attempts.map((a) => a.lockToken)}::uuid[]) AS r(id, lock_token)
           WHERE a.id = r.id AND a.lock_token = r.lock_token AND a.status = 'pending'`,
    );
  }

  /**
   * Takes the lock of the organization's endpoint's attempts asked for by hand (a
   * transaction-level advisory lock, held to the caller's commit, in a statement of its own so
   * that what follows sees every such attempt committed before), then answers the endpoint's
   * status and its attempts pending, counted up to `upTo` (an index range of
   * webhook_delivery_attempts_pending_idx); undefined when the organization has no such
   * endpoint, whose attempts are then never read. Pings and redeliveries of one endpoint thus
   * count and insert one at a time: a burst cannot pass the bound by its own size. The caller's
   * transaction bounds the wait (MANUAL_ATTEMPT_STATEMENT_TIMEOUT_MS).
   */
  async lockForManualAttempt(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
    upTo: number,
  ): Promise<ManualAttemptRoom | undefined> {
    const key = `webhook_manual_attempts:${organizationId}:${endpointId}`;
    await this.database.count(sql`SELECT pg_advisory_xact_lock(hashtextextended(${key}, 0))`, {
      manager,
    });
    const room = manualAttemptRoom(upTo);
    return this.database.row(
      room.query`SELECT ${room}
            FROM webhook_endpoints e
           WHERE e.id = ${endpointId} AND e.organization_id = ${organizationId}`,
      { manager },
    );
  }

  /** Attempts not yet made (due or scheduled), database-wide; the partial due index covers it. */
  async countPending(): Promise<number> {
    const row = await this.database.row(
      PENDING_COUNT.query`SELECT ${PENDING_COUNT} FROM webhook_delivery_attempts WHERE status = 'pending'`,
    );
    return row!.pending;
  }

  /**
   * Deletes up to `batchSize` events created before `cutoff` whose attempts are all made (their
   * attempts go with them); answers how many. SKIP LOCKED: instances purge side by side. The
   * endpoints their attempts name are locked first, in id order, as a DELETE of an endpoint
   * locks its row before its cascade reaches the attempts: both deleting the same attempts in
   * their own orders could deadlock.
   */
  async deleteEventsCreatedBefore(cutoff: Date, batchSize: number): Promise<number> {
    return this.database.transaction(async (manager) => {
      const doomed = await this.database.rows(
        EVENT_ID.query`SELECT ${EVENT_ID} FROM webhook_events
             WHERE created_at < ${cutoff}
               AND NOT EXISTS (SELECT 1 FROM webhook_delivery_attempts a
                                WHERE a.event_id = webhook_events.id AND a.status = 'pending')
             LIMIT ${batchSize}
             FOR UPDATE SKIP LOCKED`,
        { manager },
      );
      if (doomed.length === 0) return 0;
      const ids = doomed.map((event) => event.id);
      await this.database.count(
        sql`SELECT 1 FROM webhook_endpoints
             WHERE id IN (SELECT endpoint_id FROM webhook_delivery_attempts
                           WHERE event_id = ANY(${ids}::uuid[]))
             ORDER BY id FOR KEY SHARE`,
        { manager },
      );
      const row = await this.database.row(
        DELETED_COUNT.query`WITH deleted AS (
              DELETE FROM webhook_events WHERE id = ANY(${ids}::uuid[]) RETURNING 1)
            SELECT ${DELETED_COUNT} FROM deleted`,
        { manager },
      );
      return row?.count ?? 0;
    });
  }
}
