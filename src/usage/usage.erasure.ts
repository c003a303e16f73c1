import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { UsageService } from './usage.service';

/** Who talked to whom, and the end user's token rollups; the organization's totals stay. */
@Injectable()
@TakesPartInErasure()
export class UsageErasure implements ErasureParticipant {
  readonly name = 'usage';
  readonly order = ErasureOrder.DATA;
  readonly tables = ['relationship_months'];
  readonly cascades = ['token_usage_end_user_months', 'end_user_token_days'];

  constructor(private readonly usage: UsageService) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.usage.eraseEndUsers(
      manager,
      endUsers.map((endUser) => endUser.id),
    );
  }
}
