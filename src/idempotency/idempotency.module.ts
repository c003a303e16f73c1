import { Global, Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyKey } from './entities/idempotency-key.entity';
import { IdempotencyRetentionWorker } from './idempotency-retention.worker';
import { IdempotencyRepository } from './idempotency.repository';
import { IdempotencyService } from './idempotency.service';

/**
 * `Idempotency-Key` for every POST under /v1 (docs/idempotency.md). Global, because every
 * feature's POST handlers carry @AcceptsIdempotencyKey(), whose interceptor Nest builds in the
 * controller's module; a feature that wants its key marked done in its own transaction calls
 * IdempotencyService.recordInTransaction.
 */
@Global()
@Module({
  imports: [TypeOrmModule.forFeature([IdempotencyKey])],
  providers: [IdempotencyRepository, IdempotencyService, IdempotencyRetentionWorker],
  exports: [IdempotencyService],
})
export class IdempotencyModule {}
