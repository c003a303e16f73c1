import { Module } from '@nestjs/common';
import { EmbeddingsModule } from '../embeddings/embeddings.module';
import { EndUsersModule } from '../end-users/end-users.module';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { ConversationRepository } from './conversation.repository';
import { ConversationService } from './conversation.service';
import { FactsController } from './facts.controller';
import { FactsRepository } from './facts.repository';
import { FactsService } from './facts.service';
import { MemoriesController } from './memories.controller';
import { MemoriesRepository } from './memories.repository';
import { MemoriesService } from './memories.service';
import { MemoryRetentionWorker } from './memory-retention.worker';
import { PostingsTrimWorker } from './postings-trim.worker';
import { ReplyMemories } from './reply-memories.participant';

/**
 * What end users said and what is known of them (docs/memory.md): memories, facts, search,
 * the conversation a reply is written from (history, facts, recall) and retention.
 */
@Module({
  imports: [EndUsersModule, EmbeddingsModule, IdempotencyModule],
  controllers: [MemoriesController, FactsController],
  providers: [
    MemoriesRepository,
    MemoriesService,
    MemoryRetentionWorker,
    PostingsTrimWorker,

    FactsRepository,
    FactsService,

    ConversationRepository,
    ConversationService,
    ReplyMemories,
  ],
})
export class MemoryModule {}
