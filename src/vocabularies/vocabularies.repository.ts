import { Injectable } from '@nestjs/common';
import { Database } from '../database/database';
import { EmotionVocabulary } from './entities/emotion-vocabulary.entity';

export type PublishedVocabulary = Omit<EmotionVocabulary, 'createdAt'>;

/** Every query of `emotion_vocabularies`: plain single-table work, TypeORM's repository API. */
@Injectable()
export class VocabulariesRepository {
  constructor(private readonly database: Database) {}

  private get vocabularies() {
    return this.database.repository(EmotionVocabulary);
  }

  /** Inserts new versions and rewrites known ones, by version. */
  async upsertVersions(rows: PublishedVocabulary[]): Promise<void> {
    if (rows.length === 0) return;
    await this.vocabularies.upsert(rows, { conflictPaths: ['version'] });
  }

  findAllNewestFirst(): Promise<EmotionVocabulary[]> {
    return this.vocabularies.find({ order: { major: 'DESC', minor: 'DESC', patch: 'DESC' } });
  }
}
