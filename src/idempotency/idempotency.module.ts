import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { IdempotencyKey } from './entities/idempotency-key.entity';
import { IdempotencyRetentionWorker } from './idempotency-retention.worker';
import { IdempotencyInterceptor } from './idempotency.interceptor';
import { IdempotencyRepository } from './idempotency.repository';
import { IdempotencyService } from './idempotency.service';

/**
 * `Idempotency-Key` for every POST under /v1 (docs/idempotency.md). AppModule registers
 * IdempotencyInterceptor as APP_INTERCEPTOR; a feature that wants its key marked done in its own
 * transaction imports this module and calls IdempotencyService.recordInTransaction.
 */
@Module({
  imports: [TypeOrmModule.forFeature([IdempotencyKey])],
  providers: [
    IdempotencyRepository,
    IdempotencyService,
    IdempotencyInterceptor,
    IdempotencyRetentionWorker,
  ],
  exports: [IdempotencyService, IdempotencyInterceptor],
})
export class IdempotencyModule {}
