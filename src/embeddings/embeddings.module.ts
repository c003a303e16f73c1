import { Module } from '@nestjs/common';
import { Embedder } from './embedder';
import { EmbeddingWorker } from './embedding.worker';

/** Recall by meaning (contract §27): the provider's client and the background worker. */
@Module({
  providers: [Embedder, EmbeddingWorker],
  exports: [Embedder],
})
export class EmbeddingsModule {}
