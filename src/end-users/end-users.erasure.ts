import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { EndUsersRepository } from './end-users.repository';

/** The row every other table refers to: last, once the other participants found what they erase. */
@Injectable()
@TakesPartInErasure()
export class EndUsersErasure implements ErasureParticipant {
  readonly name = 'end-users';
  readonly order = ErasureOrder.END_USERS;
  readonly tables = ['end_users'];

  constructor(private readonly endUsers: EndUsersRepository) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.endUsers.deleteByIds(
      manager,
      endUsers.map((endUser) => endUser.id),
    );
  }
}
