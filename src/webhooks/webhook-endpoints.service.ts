import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import type { EntityManager } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import type { CallerContext, UserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { type Page, toPage } from '../common/pagination/pagination';
import {
  type PasswordReset,
  TakesAccountBack,
} from '../common/password-reset/password-reset-participant';
import { Clock } from '../common/time/clock';
import { webhooksConfig } from '../config/webhooks.config';
import { Database } from '../database/database';
import { tokenNoLongerValid } from '../users/token-version-held';
import { UsersService } from '../users/users.service';
import { toWebhookDeliveryResponse, type WebhookDeliveryDto } from './dto/webhook-delivery.dto';
import {
  type CreatedWebhookEndpointDto,
  type CreateWebhookEndpointDto,
  toWebhookEndpointResponse,
  type UpdateWebhookEndpointDto,
  type WebhookEndpointDto,
  type WebhookPingDto,
} from './dto/webhook-endpoint.dto';
import { assertPublicHost, UnsafeAddressError } from './ssrf-guard';
import { publicEventId } from './webhook-event-types';
import { generateWebhookSecret } from './webhook-signer';
import { auditedUrl, normalizedUrl, portProblem, URL_MAX_LENGTH } from './webhook-url';
import { type EndpointMaker, WebhooksRepository } from './webhooks.repository';

/**
 * Endpoints an organization may have, disabled ones included: every event is attempted once per
 * subscribed endpoint, so without a cap one tenant could multiply the outbox's work at will.
 */
export const MAX_ENDPOINTS_PER_ORGANIZATION = 20;

/** An endpoint with this many attempts pending takes no ping or redelivery until some are made. */
export const MANUAL_ATTEMPTS_PENDING_MAX = 100;
/**
 * Each statement of a ping's or redelivery's transaction, the wait for the endpoint's lock
 * included, takes at most this long; past it the answer is 503 `database_timeout` with
 * Retry-After. A burst queued on the lock holds pool connections only this long (found by
 * review), while ordinary concurrent redeliveries, milliseconds each, still all pass.
 */
const MANUAL_ATTEMPT_STATEMENT_TIMEOUT_MS = 1_000;

/** How long a create or update waits for the URL's host to resolve; then it is "try again". */
const URL_LOOKUP_TIMEOUT_MS = 5_000;

/** A ping or redelivery to a disabled endpoint: it receives nothing. */
const endpointDisabled = () =>
  new AppError(
    'webhook_endpoint_disabled',
    'This webhook endpoint is disabled; enable it to send it events',
  );

/** The rules of webhook endpoints: who may point where, and what they see of them. */
@Injectable()
export class WebhookEndpointsService {
  constructor(
    private readonly webhooks: WebhooksRepository,
    private readonly audit: AuditService,
    private readonly database: Database,
    private readonly clock: Clock,
    private readonly users: UsersService,
    @Inject(webhooksConfig.KEY) private readonly config: ConfigType<typeof webhooksConfig>,
  ) {}

  async create(
    caller: CallerContext,
    dto: CreateWebhookEndpointDto,
  ): Promise<CreatedWebhookEndpointDto> {
    const url = await this.acceptableUrl(dto.url);
    const secret = generateWebhookSecret();
    const row = await this.database.transaction(async (manager) => {
      if (!(await this.webhooks.lockMaker(manager, caller, this.clock.now()))) {
        throw await this.makerRefusal(caller);
      }
      const created = await this.webhooks.insertEndpointWithin(
        manager,
        caller.organizationId,
        MAX_ENDPOINTS_PER_ORGANIZATION,
        {
          url,
          events: dto.events,
          description: dto.description ?? null,
          secret,
          ...makerOf(caller),
        },
      );
      if (!created) {
        throw new AppError(
          'webhook_endpoint_limit',
          `An organization has at most ${MAX_ENDPOINTS_PER_ORGANIZATION} webhook endpoints; delete one first`,
        );
      }
      await this.audit.record(manager, caller, {
        organizationId: caller.organizationId,
        action: 'webhook_endpoint.created',
        target: { type: 'webhook_endpoint', id: created.id },
        details: { url: auditedUrl(created.url), events: created.events },
      });
      return created;
    });
    return { ...toWebhookEndpointResponse(row), secret };
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<WebhookEndpointDto>> {
    const rows = await this.webhooks.findEndpointPage(organizationId, limit, startingAfter);
    return toPage(rows, limit, toWebhookEndpointResponse);
  }

  async get(organizationId: string, id: string): Promise<WebhookEndpointDto> {
    const row = await this.webhooks.findEndpoint(organizationId, id);
    if (!row) throw AppError.notFound('Webhook endpoint');
    return toWebhookEndpointResponse(row);
  }

  async update(
    caller: CallerContext,
    id: string,
    dto: UpdateWebhookEndpointDto,
  ): Promise<WebhookEndpointDto> {
    const { organizationId } = caller;
    const changes =
      dto.url === undefined ? dto : { ...dto, url: await this.acceptableUrl(dto.url) };
    const row = await this.database.transaction(async (manager) => {
      const now = this.clock.now();
      // A new URL is sent to by whoever set it (makerOf): made as a creation is.
      if (changes.url !== undefined && !(await this.webhooks.lockMaker(manager, caller, now))) {
        throw await this.makerRefusal(caller);
      }
      const updated = await this.webhooks.updateEndpoint(
        manager,
        organizationId,
        id,
        changes,
        makerOf(caller),
        now,
      );
      if (!updated) return undefined;
      if (updated.status === 'disabled') {
        await this.webhooks.cancelPendingAttempts(manager, organizationId, id, now);
      }
      // What the PATCH named, as written but for the URL's credentials (a disabled endpoint is the
      // change that matters most); one that names nothing changes nothing, and is not recorded.
      if (Object.keys(changes).length > 0) {
        await this.audit.record(manager, caller, {
          organizationId,
          action: 'webhook_endpoint.updated',
          target: { type: 'webhook_endpoint', id },
          details: {
            ...changes,
            ...(changes.url !== undefined && { url: auditedUrl(changes.url) }),
          },
        });
      }
      return updated;
    });
    if (!row) throw AppError.notFound('Webhook endpoint');
    return toWebhookEndpointResponse(row);
  }

  /**
   * Why lockMaker refused: a user's token ended by a password reset (401) or their role gone
   * (403); an API key revoked or expired since its request was let in (401).
   */
  private async makerRefusal(caller: CallerContext): Promise<AppError> {
    if (caller.kind === 'api_key') return AppError.unauthenticated();
    return (await this.users.tokenEnded(caller)) ? tokenNoLongerValid() : roleGone();
  }

  /**
   * In the transaction of a password reset that took back an address never verified before:
   * disables the endpoints of every organization the user is alone in and those the user made in
   * any other (with their token, or through a key they made), and ends their pending attempts,
   * as a PATCH to `disabled` does (audited, actor the user, `reason: "password_reset"`). Whoever
   * registered the address first could point them anywhere with a signing secret they kept: the
   * mailbox's owner would have gone on sending them the organization's events (found by review;
   * an organization the squatter shared with a second account of theirs kept its endpoints until
   * endpoints recorded who made them). Endpoints made before that was recorded, in an
   * organization with other members, stay as they are: one of those members may have made each.
   */
  @TakesAccountBack()
  async disableAtReset(
    manager: EntityManager,
    { userId, wasVerified }: PasswordReset,
  ): Promise<undefined> {
    if (wasVerified) return undefined;
    const now = this.clock.now();
    for (const {
      id,
      organization_id: organizationId,
    } of await this.webhooks.disableEndpointsTakenBack(manager, userId, now)) {
      await this.webhooks.cancelPendingAttempts(manager, organizationId, id, now);
      const caller: UserCaller = { kind: 'user', userId, organizationId, scopes: ['admin'] };
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'webhook_endpoint.updated',
        target: { type: 'webhook_endpoint', id },
        details: { status: 'disabled', reason: 'password_reset' },
      });
    }
    return undefined;
  }

  async remove(caller: CallerContext, id: string): Promise<void> {
    await this.database.transaction(async (manager) => {
      const deleted = await this.webhooks.deleteEndpoint(manager, caller.organizationId, id);
      if (!deleted) throw AppError.notFound('Webhook endpoint');
      await this.audit.record(manager, caller, {
        organizationId: caller.organizationId,
        action: 'webhook_endpoint.deleted',
        target: { type: 'webhook_endpoint', id },
        details: { url: auditedUrl(deleted.url), events: deleted.events },
      });
    });
  }

  /** Queues a `ping` for this endpoint alone; a disabled endpoint receives nothing (409). */
  async ping(organizationId: string, id: string): Promise<WebhookPingDto> {
    const eventId = await this.database.transaction(
      async (manager) => {
        await this.lockForManualAttempt(manager, organizationId, id);
        return this.webhooks.insertPing(manager, organizationId, id, this.clock.now());
      },
      { statementTimeoutMs: MANUAL_ATTEMPT_STATEMENT_TIMEOUT_MS },
    );
    if (eventId) return { event_id: publicEventId(eventId) };
    // Disabled or deleted since the lock's read (a change committed in between).
    if (await this.webhooks.findEndpoint(organizationId, id)) throw endpointDisabled();
    throw AppError.notFound('Webhook endpoint');
  }

  async deliveries(
    organizationId: string,
    endpointId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<WebhookDeliveryDto>> {
    const [endpoint, rows] = await Promise.all([
      this.webhooks.findEndpoint(organizationId, endpointId),
      this.webhooks.findAttemptPage(organizationId, endpointId, limit, startingAfter),
    ]);
    if (!endpoint) throw AppError.notFound('Webhook endpoint');
    return toPage(rows, limit, toWebhookDeliveryResponse);
  }

  /**
   * Takes the endpoint's lock for attempts asked for by hand (to the transaction's commit), then
   * refuses: 404 without the endpoint, 409 `webhook_endpoint_disabled` when it is disabled (it
   * receives nothing), 409 `conflict` when it has MANUAL_ATTEMPTS_PENDING_MAX attempts pending: a
   * ping or a redelivery adds one more, and an admin repeating them at the rate limit against an
   * endpoint that drains slowly would grow the queue without end (found by review). Events go on
   * being queued; only the attempts asked for by hand wait. Under the lock, concurrent pings and
   * redeliveries of the endpoint count one after another, so a burst cannot pass the bound.
   */
  private async lockForManualAttempt(
    manager: EntityManager,
    organizationId: string,
    endpointId: string,
  ): Promise<void> {
    const room = await this.webhooks.lockForManualAttempt(
      manager,
      organizationId,
      endpointId,
      MANUAL_ATTEMPTS_PENDING_MAX,
    );
    if (!room) throw AppError.notFound('Webhook endpoint');
    if (room.status === 'disabled') throw endpointDisabled();
    if (room.pending >= MANUAL_ATTEMPTS_PENDING_MAX) {
      throw new AppError(
        'conflict',
        `This webhook endpoint has ${MANUAL_ATTEMPTS_PENDING_MAX} deliveries pending; ping or redeliver once they are made`,
      );
    }
  }

  /**
   * A new attempt of a delivery's event to its endpoint, due now (the worker makes it within its
   * poll interval), recorded in the audit log in the same transaction. A disabled endpoint
   * receives nothing: 409, as a ping.
   */
  async redeliver(
    caller: CallerContext,
    endpointId: string,
    deliveryId: string,
  ): Promise<WebhookDeliveryDto> {
    const row = await this.database.transaction(
      async (manager) => {
        await this.lockForManualAttempt(manager, caller.organizationId, endpointId);
        const redelivery = await this.webhooks.insertRedelivery(
          manager,
          caller.organizationId,
          endpointId,
          deliveryId,
          this.clock.now(),
        );
        if (redelivery === 'not_found') throw AppError.notFound('Webhook delivery');
        if (redelivery === 'disabled') throw endpointDisabled();
        await this.audit.record(manager, caller, {
          organizationId: caller.organizationId,
          action: 'webhook_delivery.redelivered',
          target: { type: 'webhook_delivery', id: redelivery.id },
          details: {
            webhook_endpoint_id: endpointId,
            redelivery_of: deliveryId,
            event_id: publicEventId(redelivery.event_id),
            event_type: redelivery.event_type,
            attempt: redelivery.attempt,
          },
        });
        return redelivery;
      },
      { statementTimeoutMs: MANUAL_ATTEMPT_STATEMENT_TIMEOUT_MS },
    );
    return toWebhookDeliveryResponse(row);
  }

  /**
   * The URL to store: normalised (its WHATWG serialisation). Refused when its port is not one of
   * WEBHOOK_ALLOWED_PORTS, or its host is, or resolves to, a non-public address (unless
   * WEBHOOK_ALLOW_PRIVATE_URLS), or does not resolve at all. Both are checked again at every
   * delivery. A refusal names the host as given, never what it resolved to, and says the same
   * of a name that does not resolve as of one that resolves to an internal address. A name the
   * resolver cannot answer for within URL_LOOKUP_TIMEOUT_MS is refused as "try again".
   */
  private async acceptableUrl(text: string): Promise<string> {
    const url = new URL(normalizedUrl(text));
    const refuse = (problem: string) =>
      AppError.validation([{ field: 'url', problem }], 'The URL cannot receive webhooks');
    // The bound holds for what is stored: normalising percent-encodes, and 2,000 `é` became
    // 12,000 characters that a PATCH could not send back (found by review).
    if (url.href.length > URL_MAX_LENGTH) {
      throw refuse(`must be at most ${URL_MAX_LENGTH} characters once normalised`);
    }
    const badPort = portProblem(url, this.config.allowedPorts);
    if (badPort) throw refuse(badPort);
    if (this.config.allowPrivateUrls) return url.href;
    try {
      await assertPublicHost(url, URL_LOOKUP_TIMEOUT_MS);
    } catch (error) {
      throw refuse(
        error instanceof UnsafeAddressError
          ? `${error.message}; webhooks are sent to public addresses only`
          : 'the host could not be resolved just now; try again',
      );
    }
    return url.href;
  }
}

/** A user whose owner or admin role went (demoted or removed) while their request ran. */
const roleGone = () =>
  new AppError('insufficient_scope', 'Managing webhook endpoints needs the owner or admin role');

/**
 * Who makes an endpoint send where it does, recorded at its creation and at each change of its
 * URL: a takeback disables what its user pointed (disableAtReset).
 */
function makerOf(caller: CallerContext): EndpointMaker {
  return {
    createdByUserId: caller.kind === 'user' ? caller.userId : null,
    createdByApiKeyId: caller.kind === 'api_key' ? caller.apiKeyId : null,
  };
}
