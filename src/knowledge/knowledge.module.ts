import { Module } from '@nestjs/common';
import { EmbeddingsModule } from '../embeddings/embeddings.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { OrganizationsModule } from '../organizations/organizations.module';
import { KnowledgeWriteTurns } from './knowledge-write-turns';
import { KnowledgeTermRefillWorker } from './knowledge-term-refill.worker';
import { KnowledgeBodies } from './knowledge-bodies';
import { KnowledgeController } from './knowledge.controller';
import { KnowledgeRepository } from './knowledge.repository';
import { KnowledgeService } from './knowledge.service';

/**
 * The business's documents (docs/knowledge.md). KnowledgeService is a reply participant
 * (@ReadsForReplies): every reply reads the chunks relevant to its message, nothing to import.
 */
@Module({
  imports: [IdempotencyModule, EmbeddingsModule, OrganizationsModule],
  controllers: [KnowledgeController],
  providers: [
    KnowledgeBodies,
    KnowledgeRepository,
    KnowledgeService,
    KnowledgeTermRefillWorker,
    KnowledgeWriteTurns,
  ],
})
export class KnowledgeModule {}
