import { Injectable } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { EmotionVocabulary } from './entities/emotion-vocabulary.entity';

export type PublishedVocabulary = Omit<EmotionVocabulary, 'createdAt'>;

/** Every query of `emotion_vocabularies`. */
@Injectable()
export class VocabulariesRepository {
  constructor(
    @InjectRepository(EmotionVocabulary)
    private readonly vocabularies: Repository<EmotionVocabulary>,
  ) {}

  /** Inserts new versions and rewrites known ones, by version. */
  async upsertVersions(rows: PublishedVocabulary[]): Promise<void> {
    if (rows.length === 0) return;
    await this.vocabularies.upsert(rows, { conflictPaths: ['version'] });
  }

  findAllNewestFirst(): Promise<EmotionVocabulary[]> {
    return this.vocabularies.find({ order: { major: 'DESC', minor: 'DESC', patch: 'DESC' } });
  }
}
