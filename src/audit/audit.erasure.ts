import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import {
  type ErasedEndUser,
  type ErasureParticipant,
  ErasureOrder,
  TakesPartInErasure,
} from '../common/erasure/erasure-participant';
import { AuditService } from './audit.service';

@Injectable()
@TakesPartInErasure()
export class AuditErasure implements ErasureParticipant {
  readonly name = 'audit';
  readonly order = ErasureOrder.REDACTIONS;
  readonly tables = ['audit_events'];

  constructor(private readonly audit: AuditService) {}

  erase(manager: EntityManager, endUsers: readonly ErasedEndUser[]): Promise<void> {
    return this.audit.redactErasedEndUsers(manager, endUsers);
  }
}
