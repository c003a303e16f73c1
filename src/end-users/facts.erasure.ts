import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { FactsRepository } from './facts.repository';

/** Facts go before the memories they name, which would otherwise set their memory_id to null. */
@Injectable()
@TakesPartInErasure()
export class FactsErasure implements ErasureParticipant {
  readonly name = 'facts';
  readonly order = ErasureOrder.REFERRERS;
  readonly tables = ['end_user_facts'];

  constructor(private readonly facts: FactsRepository) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.facts.deleteForEndUsers(
      manager,
      endUsers.map((endUser) => endUser.id),
    );
  }
}
