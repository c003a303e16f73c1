import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import type { SubscribableEventType } from './webhook-event-types';
import { webhookEventStep, WebhooksRepository } from './webhooks.repository';
import { SECRET_FIELD_NAMES } from '../common/crypto/secret-fields';

/** Keys that name a secret: event data holding one is a programming error, refused at once. */
const SECRET_KEYS = new Set(SECRET_FIELD_NAMES);
const MAX_CHECKED_DEPTH = 8;

function secretKeyIn(value: unknown, depth = 0): string | undefined {
  if (depth > MAX_CHECKED_DEPTH || value === null || typeof value !== 'object') return undefined;
  for (const [key, inner] of Object.entries(value)) {
    if (SECRET_KEYS.has(key.toLowerCase())) return key;
    const found = secretKeyIn(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/**
 * What other modules call to send an event to the organization's webhook endpoints. The event
 * is written to the outbox in the caller's transaction, so it exists exactly when the change
 * does, and is delivered after the commit by the delivery worker of any instance. Nothing is
 * written when no enabled endpoint of the organization subscribes to the type.
 */
@Injectable()
export class WebhookEventsService {
  constructor(private readonly webhooks: WebhooksRepository) {}

  /**
   * In the transaction that makes the change: `data` holds safe facts about it (ids, names,
   * states), never a secret (a key named like one throws, which rolls the change back).
   */
  async emit(
    manager: EntityManager,
    organizationId: string,
    type: SubscribableEventType,
    data: Record<string, unknown>,
  ): Promise<void> {
    const secretKey = secretKeyIn(data);
    if (secretKey !== undefined) {
      throw new Error(`webhook event ${type}: data must not hold a secret (key "${secretKey}")`);
    }
    await this.webhooks.insertEvent(manager, organizationId, type, data);
  }

  /**
   * For a hot path that makes its change in one statement (like AuditService.step): CTE steps to
   * append to that statement's WITH list, writing one event of `type` per row of the CTE
   * `source`, which must return `webhook_data` jsonb (never a secret: nothing checks SQL-built
   * data at run time, so keep to ids, names and states). The step's parameters start at
   * `$firstParam`; append `params` to the statement's. It adds the CTEs `webhook_event` and
   * `webhook_attempt`. One statement is one transaction: the event commits with the change.
   *
   * ```ts
   * const event = this.webhookEvents.step('created', 4, { organizationId, type: 'end_user.created' });
   * await pool.query(
   *   `WITH created AS (INSERT INTO end_users … RETURNING …, jsonb_build_object('user_id', user_id) AS webhook_data),
   *    ${event.sql}
   *    SELECT … FROM created`,
   *   [a, b, c, ...event.params],
   * );
   * ```
   */
  step(
    source: string,
    firstParam: number,
    event: { organizationId: string; type: SubscribableEventType },
  ): { sql: string; params: unknown[] } {
    return webhookEventStep(source, firstParam, event);
  }
}
