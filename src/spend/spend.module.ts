import { Module } from '@nestjs/common';
import { OrganizationsModule } from '../organizations/organizations.module';
import { LimitsController } from './limits.controller';
import { LimitsRepository } from './limits.repository';
import { LimitsService } from './limits.service';
import { SpendReservationsRepository } from './spend-reservations.repository';
import { SpendService } from './spend.service';
import { ReplyBudgets } from './reply-budgets.admitter';

/**
 * Spend control (contract §23, docs/spend-control.md): an organization's limits, and the
 * admission of /v1/respond against its token budgets. The rate limiter reads the limits for the
 * end users' buckets; every reply is admitted by ReplyBudgets (@AdmitsReplies) before the
 * provider, and its steps join the reply's statement.
 */
@Module({
  imports: [OrganizationsModule],
  controllers: [LimitsController],
  providers: [
    LimitsRepository,
    LimitsService,
    SpendReservationsRepository,
    SpendService,
    ReplyBudgets,
  ],
  exports: [LimitsService],
})
export class SpendModule {}
