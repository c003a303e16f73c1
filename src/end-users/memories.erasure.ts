import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { MemoriesRepository } from './memories.repository';

@Injectable()
@TakesPartInErasure()
export class MemoriesErasure implements ErasureParticipant {
  readonly name = 'memories';
  readonly order = ErasureOrder.DATA;
  readonly tables = ['memory_terms', 'memories'];

  constructor(private readonly memories: MemoriesRepository) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.memories.deleteForEndUsers(
      manager,
      endUsers.map((endUser) => endUser.id),
    );
  }
}
