import { Module } from '@nestjs/common';
import { EmbeddingsModule } from '../embeddings/embeddings.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { KnowledgeTermRefillWorker } from './knowledge-term-refill.worker';
import { KnowledgeController } from './knowledge.controller';
import { KnowledgeRepository } from './knowledge.repository';
import { KnowledgeService } from './knowledge.service';

/**
 * The business's documents (docs/knowledge.md). Import it and inject KnowledgeService to give a
 * reply the chunks relevant to its message (`recall`).
 */
@Module({
  imports: [IdempotencyModule, EmbeddingsModule],
  controllers: [KnowledgeController],
  providers: [KnowledgeRepository, KnowledgeService, KnowledgeTermRefillWorker],
  exports: [KnowledgeService],
})
export class KnowledgeModule {}
