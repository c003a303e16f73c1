import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { IdempotencyService } from './idempotency.service';

/** Stored Idempotency-Key answers about them (their metadata, their conversations). */
@Injectable()
@TakesPartInErasure()
export class IdempotencyErasure implements ErasureParticipant {
  readonly name = 'idempotency';
  readonly order = ErasureOrder.DATA;
  readonly tables = ['idempotency_keys'];

  constructor(private readonly idempotency: IdempotencyService) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.idempotency.forgetEndUsers(manager, endUsers);
  }
}
