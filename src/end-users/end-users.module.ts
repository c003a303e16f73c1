import { Module } from '@nestjs/common';
import { AuditModule } from '../audit/audit.module';
import { ErasureModule } from '../common/erasure/erasure.module';
import { EmbeddingsModule } from '../embeddings/embeddings.module';
import { EndUsersController } from './end-users.controller';
import { EndUsersRepository } from './end-users.repository';
import { EndUsersService } from './end-users.service';
import { ErasureWorker } from './erasure.worker';
import { MemoriesController } from './memories.controller';
import { MemoriesRepository } from './memories.repository';
import { MemoriesService } from './memories.service';
import { MemoryRetentionWorker } from './memory-retention.worker';
import { FactsController } from './facts.controller';
import { FactsRepository } from './facts.repository';
import { FactsService } from './facts.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [ErasureModule, IdempotencyModule, AuditModule, EmbeddingsModule],
  controllers: [EndUsersController, MemoriesController, FactsController],
  providers: [
    EndUsersRepository,
    EndUsersService,
    ErasureWorker,

    MemoriesRepository,
    MemoriesService,
    MemoryRetentionWorker,

    FactsRepository,
    FactsService,
  ],
  exports: [EndUsersService, FactsService],
})
export class EndUsersModule {}
