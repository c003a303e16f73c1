import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { AppError } from '../common/errors/app-error';
import { StaticJson } from '../common/http/static-json';
import { Page } from '../common/pagination/pagination';
import { ChangelogEntryDto, VocabularyVersionDto } from './dto/vocabulary.dto';
import { EmotionVocabulary } from './entities/emotion-vocabulary.entity';
import { type PublishedVocabulary, VocabulariesRepository } from './vocabularies.repository';
import { parseSemver, readVocabularyFiles } from './vocabulary-files';

/** limit ∈ 1..100 (ListQueryDto) times a known cursor or none: at most 100 × (versions + 1). */
type PageKey = `${number}:${string}`;

/**
 * The published emotion vocabularies. Published versions never change, so they are read from
 * the database once at start-up (after the shipped files are upserted) and served from memory,
 * already serialized: a public GET costs no JSON work.
 */
@Injectable()
export class VocabulariesService implements OnApplicationBootstrap {
  private newestFirst: EmotionVocabulary[] = [];
  private versionJson = new Map<string, StaticJson>();
  private emotionNames = new Map<string, ReadonlySet<string>>();
  private everyEmotionName: ReadonlySet<string> = new Set();
  private changelog: ChangelogEntryDto[] = [];
  private changelogPages = new Map<PageKey, StaticJson>();

  constructor(
    private readonly repository: VocabulariesRepository,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(VocabulariesService.name);
  }

  async onApplicationBootstrap(): Promise<void> {
    await this.publishShippedVersions();
    await this.reload();
  }

  /** Upserts the versions shipped in `data/`, so a deploy that adds a file publishes it. */
  async publishShippedVersions(): Promise<void> {
    const rows = readVocabularyFiles().map((file): PublishedVocabulary => {
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
    await this.repository.upsertVersions(rows);
  }

  async reload(): Promise<void> {
    this.newestFirst = await this.repository.findAllNewestFirst();
    this.versionJson = new Map(
      this.newestFirst.map((row) => [row.version, new StaticJson(toVersionDto(row))]),
    );
    this.emotionNames = new Map(
      this.newestFirst.map((row) => [row.version, new Set(row.emotions.map((e) => e.name))]),
    );
    this.everyEmotionName = new Set(
      this.newestFirst.flatMap((row) => row.emotions.map((emotion) => emotion.name)),
    );
    this.changelog = this.newestFirst.map(toChangelogEntry);
    this.changelogPages = new Map();
    this.logger.info(
      { versions: this.newestFirst.map((row) => row.version) },
      'emotion vocabularies loaded',
    );
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

  /** listChangelog's page, serialized the first time it is asked for. */
  changelogJson(limit: number, startingAfter?: string): StaticJson {
    const key: PageKey = `${limit}:${startingAfter ?? ''}`;
    let page = this.changelogPages.get(key);
    if (!page) {
      // Throws for an unknown cursor before anything is kept: only real pages are cached.
      page = new StaticJson(this.listChangelog(limit, startingAfter));
      this.changelogPages.set(key, page);
    }
    return page;
  }

  latestJson(): StaticJson {
    return this.getJson(this.latestDefinition().version);
  }

  /** The newest vocabulary with its detection cues, for the response engine. */
  latestDefinition(): EmotionVocabulary {
    const newest = this.newestFirst[0];
    if (!newest) throw AppError.notFound('Emotion vocabulary');
    return newest;
  }

  /** The emotion names of a published version; undefined for a version never published. */
  emotionNamesOf(version: string): ReadonlySet<string> | undefined {
    return this.emotionNames.get(version);
  }

  /** The names of every published version: an emotion the service has ever named. */
  emotionNamesOfEveryVersion(): ReadonlySet<string> {
    return this.everyEmotionName;
  }

  getJson(version: string): StaticJson {
    const found = this.versionJson.get(version);
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
