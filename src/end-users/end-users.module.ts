import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { ErasureModule } from '../common/erasure/erasure.module';
import { EndUsersController } from './end-users.controller';
import { EndUsersRepository } from './end-users.repository';
import { EndUsersService } from './end-users.service';
import { ErasureWorker } from './erasure.worker';
import { IdempotencyModule } from '../idempotency/idempotency.module';

/** The end users of an organization and their erasure; what they said is the memory module's. */
@Module({
  imports: [ErasureModule, IdempotencyModule, AuditModule],
  controllers: [EndUsersController],
  providers: [EndUsersRepository, EndUsersService, ErasureWorker],
  exports: [EndUsersService],
})
export class EndUsersModule {}
