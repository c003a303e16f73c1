import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { Repository } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { Page } from '../common/pagination/pagination';
import { ChangelogEntryDto, VocabularyVersionDto } from './dto/vocabulary.dto';
import { EmotionVocabulary } from './entities/emotion-vocabulary.entity';
import { parseSemver, readVocabularyFiles } from './vocabulary-files';

/**
 * The published emotion vocabularies. Published versions never change, so they are read from
 * the database once at start-up (after the shipped files are upserted) and served from memory.
 */
@Injectable()
export class VocabulariesService implements OnApplicationBootstrap {
  private newestFirst: EmotionVocabulary[] = [];
  private byVersion = new Map<string, VocabularyVersionDto>();
  private changelog: ChangelogEntryDto[] = [];

  constructor(
    @InjectRepository(EmotionVocabulary)
    private readonly vocabularies: Repository<EmotionVocabulary>,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.publishShippedVersions();
    await this.reload();
  }

  /** Upserts the versions shipped in `data/`, so a deploy that adds a file publishes it. */
  async publishShippedVersions(): Promise<void> {
    const rows = readVocabularyFiles().map((file) => {
      const [major, minor, patch] = parseSemver(file.version);
      return {
        version: file.version,
        major,
        minor,
        patch,
        publishedAt: new Date(file.published_at),
        summary: file.summary,
        added: file.added,
        removed: file.removed,
        emotions: file.emotions,
      };
    });
    if (rows.length === 0) return;
    await this.vocabularies.upsert(rows, { conflictPaths: ['version'] });
  }

  async reload(): Promise<void> {
    this.newestFirst = await this.vocabularies.find({
      order: { major: 'DESC', minor: 'DESC', patch: 'DESC' },
    });
    this.byVersion = new Map(this.newestFirst.map((row) => [row.version, toVersionDto(row)]));
    this.changelog = this.newestFirst.map(toChangelogEntry);
  }

  /** Newest first, paged by version. */
  listChangelog(limit: number, startingAfter?: string): Page<ChangelogEntryDto> {
    let start = 0;
    if (startingAfter !== undefined) {
      const index = this.changelog.findIndex((entry) => entry.version === startingAfter);
      if (index === -1) throw AppError.notFound('Vocabulary version');
      start = index + 1;
    }
    const data = this.changelog.slice(start, start + limit);
    return { data, has_more: start + limit < this.changelog.length };
  }

  latest(): VocabularyVersionDto {
    const newest = this.newestFirst[0];
    if (!newest) throw AppError.notFound('Emotion vocabulary');
    return this.byVersion.get(newest.version)!;
  }

  /** The newest vocabulary with its detection cues, for the response engine. */
  latestDefinition(): EmotionVocabulary {
    const newest = this.newestFirst[0];
    if (!newest) throw AppError.notFound('Emotion vocabulary');
    return newest;
  }

  get(version: string): VocabularyVersionDto {
    const found = this.byVersion.get(version);
    if (!found) throw AppError.notFound(`Vocabulary version ${version}`);
    return found;
  }
}

function toChangelogEntry(row: EmotionVocabulary): ChangelogEntryDto {
  return {
    version: row.version,
    published_at: row.publishedAt.toISOString(),
    summary: row.summary,
    added: row.added,
    removed: row.removed,
  };
}

function toVersionDto(row: EmotionVocabulary): VocabularyVersionDto {
  return {
    version: row.version,
    published_at: row.publishedAt.toISOString(),
    emotions: row.emotions.map((emotion) => ({
      name: emotion.name,
      description: emotion.description,
      valence: emotion.valence,
      arousal: emotion.arousal,
      cues: emotion.cues,
    })),
  };
}
