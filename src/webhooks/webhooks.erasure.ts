import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { Clock } from '../common/time/clock';
import { WebhookEventsService } from './webhook-events.service';

/**
 * `end_user.deleted`, in the erasure's transaction. Erases nothing: the outbox holds ids only
 * and keeps events until its retention (docs/data-plane.md).
 */
@Injectable()
@TakesPartInErasure()
export class WebhooksErasure implements ErasureParticipant {
  readonly name = 'webhooks';
  readonly order = ErasureOrder.NOTICES;
  readonly tables = [];

  constructor(
    private readonly webhookEvents: WebhookEventsService,
    private readonly clock: Clock,
  ) {}

  async erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    const deletedAt = this.clock.now().toISOString();
    for (const endUser of endUsers) {
      await this.webhookEvents.emit(manager, endUser.organizationId, 'end_user.deleted', {
        user_id: endUser.userId,
        deleted_at: deletedAt,
      });
    }
  }
}
