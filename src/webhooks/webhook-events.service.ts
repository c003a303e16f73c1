import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { Clock } from '../common/time/clock';
import type { SubscribableEventType } from './webhook-event-types';
import { WebhooksRepository } from './webhooks.repository';
import { SECRET_FIELD_NAMES } from '../common/crypto/secret-fields';
import {
  type ErasedEndUser,
  ErasesEndUsers,
  ErasureOrder,
} from '../common/erasure/erasure-participant';

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
 * written when no enabled endpoint of the organization subscribes to the type. A change made in
 * one statement carries the event with webhook-event.step.ts instead.
 */
@Injectable()
export class WebhookEventsService {
  constructor(
    private readonly webhooks: WebhooksRepository,
    private readonly clock: Clock,
  ) {}

  /**
   * In the transaction that makes the change: `data` holds safe facts about it (ids, names,
   * states), never a secret (a key named like one throws, which rolls the change back). The
   * first attempts are due at once (the Clock's now).
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
    await this.webhooks.insertEvent(manager, organizationId, type, data, this.clock.now());
  }

  /**
   * Erasure's notice, once nothing of the end users is left: `end_user.deleted`. It erases
   * nothing: the outbox holds ids only and keeps events until its retention (docs/data-plane.md).
   */
  @ErasesEndUsers({ order: ErasureOrder.NOTICES, tables: [] })
  async announceErasure(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    const deletedAt = this.clock.now().toISOString();
    for (const endUser of endUsers) {
      await this.emit(manager, endUser.organizationId, 'end_user.deleted', {
        user_id: endUser.userId,
        deleted_at: deletedAt,
      });
    }
  }
}
