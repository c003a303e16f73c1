import { Module } from '@nestjs/common';
import { IdempotencyRetentionWorker } from './idempotency-retention.worker';
import { IdempotencyRepository } from './idempotency.repository';
import { IdempotencyService } from './idempotency.service';

/**
 * `Idempotency-Key` for every POST under /v1 (docs/idempotency.md). A module whose controllers
 * carry @AcceptsIdempotencyKey() imports this one, because Nest builds a route's interceptor in
 * the controller's module; a feature that wants its key marked done in its own transaction calls
 * IdempotencyService.recordInTransaction.
 */
@Module({
  providers: [IdempotencyRepository, IdempotencyService, IdempotencyRetentionWorker],
  exports: [IdempotencyService],
})
export class IdempotencyModule {}
