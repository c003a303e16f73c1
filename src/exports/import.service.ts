import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import type { EntityManager } from 'typeorm';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { memoryConfig } from '../config/memory.config';
import { Database } from '../database/database';
import { factKey, normalizeFact } from '../end-users/dto/fact.dto';
import { EndUsersService } from '../end-users/end-users.service';
import type { NewMemory } from '../end-users/memories.step';
import { PersonalitiesService } from '../personalities/personalities.service';
import { VocabulariesService } from '../vocabularies/vocabularies.service';
import type { ImportResultDto } from './dto/import-result.dto';
import { checkImport } from './import-rules';
import { ImportRepository } from './import.repository';
import { type PmfDocument, PmfV1Validator } from './pmf-v1';

/**
 * Memories per statement: 10 parameters each, well under PostgreSQL's 65,535, and about 2 MB of
 * text at most per round trip for realistic messages.
 */
const MEMORY_BATCH = 1_000;
/** Facts per statement (7 parameters each). */
const FACT_BATCH = 1_000;

/**
 * POST /v1/end-users/import: a PMF v1 document back into an organization (docs/pmf-v1.md#import).
 * The document is checked whole before anything is written (the published schema, then the
 * service's rules), then written in one transaction: the end user (whose user_id must be new:
 * the unique constraint decides, under any concurrency), the personalities it needs, its
 * memories in their order, and its facts pointing at their messages' new ids. All or nothing.
 * Relationships are not imported and nothing is counted: a relationship counts when a reply is
 * written, and an import writes none.
 */
@Injectable()
export class ImportService {
  private readonly validator = new PmfV1Validator();
  private readonly factsLimit: number;

  constructor(
    @Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>,
    private readonly database: Database,
    private readonly repository: ImportRepository,
    private readonly endUsers: EndUsersService,
    private readonly personalities: PersonalitiesService,
    private readonly vocabularies: VocabulariesService,
    private readonly clock: Clock,
  ) {
    this.factsLimit = memory.factsLimit;
  }

  async import(caller: CallerContext, body: unknown): Promise<ImportResultDto> {
    const document = this.validator.parse(body);
    const now = this.clock.now();
    checkImport(document, {
      now,
      factsLimit: this.factsLimit,
      emotionNamesOf: (version) => this.vocabularies.emotionNamesOf(version),
    });
    return this.database.transaction((manager) =>
      this.write(manager, caller.organizationId, document, now),
    );
  }

  private async write(
    manager: EntityManager,
    organizationId: string,
    document: PmfDocument,
    now: Date,
  ): Promise<ImportResultDto> {
    const userId = document.end_user.user_id;
    const endUserId = await this.repository.insertEndUser(manager, {
      organizationId,
      userId,
      metadataJson: JSON.stringify(document.end_user.metadata),
      createdAt: new Date(document.end_user.created_at),
      updatedAt: now,
    });
    if (!endUserId) throw await this.taken(organizationId, userId);

    const personalities = await this.personalities.provideForImport(
      manager,
      organizationId,
      document.personalities,
      '/personalities',
    );
    const personalityOf = new Map(
      document.personalities.map((p, index) => [p.id.toLowerCase(), personalities.ids[index]]),
    );

    // The document's memory id → the new one, for the facts learned from them.
    const memoryIds = new Map<string, string>();
    const { memories } = document;
    for (let start = 0; start < memories.length; start += MEMORY_BATCH) {
      const batch = memories.slice(start, start + MEMORY_BATCH);
      const ids = await this.repository.insertMemories(
        manager,
        batch.map((memory): NewMemory => ({
          organizationId,
          endUserId,
          personalityId: personalityOf.get(memory.personality_id.toLowerCase())!,
          role: memory.role,
          content: memory.content,
          emotion: memory.emotion?.name ?? null,
          intensity: memory.emotion?.intensity ?? null,
          vocabularyVersion: memory.vocabulary_version,
          createdAt: new Date(memory.created_at),
          safety: memory.safety ?? null,
        })),
      );
      batch.forEach((memory, index) => memoryIds.set(memory.id, ids[index]));
    }

    const facts = document.facts ?? [];
    let factsImported = 0;
    for (let start = 0; start < facts.length; start += FACT_BATCH) {
      factsImported += await this.repository.insertFacts(
        manager,
        { organizationId, endUserId },
        facts.slice(start, start + FACT_BATCH).map((fact) => {
          const content = normalizeFact(fact.content);
          return {
            content,
            key: factKey(content),
            source: fact.source,
            memoryId: fact.memory_id === null ? null : memoryIds.get(fact.memory_id)!,
            createdAt: new Date(fact.created_at),
            updatedAt: new Date(fact.updated_at),
          };
        }),
      );
    }

    return {
      user_id: userId,
      personalities_created: personalities.created,
      memories_imported: memories.length,
      facts_imported: factsImported,
    };
  }

  /** Why the user_id is taken: under deletion (with when it frees up), or simply existing. */
  private async taken(organizationId: string, userId: string): Promise<AppError> {
    const existing = await this.endUsers.findRow(organizationId, userId).catch((error: unknown) => {
      // Erased meanwhile: it was taken when the insert ran, which is what the client is told.
      if (error instanceof AppError && error.code === 'not_found') return undefined;
      throw error;
    });
    if (existing?.status === 'deleting') return this.endUsers.underDeletion(existing);
    return new AppError(
      'end_user_exists',
      'The organization already has an end user with this user_id; an import creates a new one',
    );
  }
}
