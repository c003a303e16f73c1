import { Inject, Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { isUUID } from 'class-validator';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import type { EntityManager } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import { WebhookEventsService } from '../webhooks/webhook-events.service';
import { IdempotencyService } from '../idempotency/idempotency.service';
import type { CallerContext } from '../common/auth/caller';
import { Caches } from '../common/cache/caches';
import type { SharedCache } from '../common/cache/shared-cache';
import { AppError, type FieldProblem } from '../common/errors/app-error';
import { MAX_LISTED_PROBLEMS } from '../common/validation/json-schema-problems';
import { Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { modelsConfig } from '../config/engine.config';
import { Database } from '../database/database';
import { compareVersions } from '../vocabularies/vocabulary-files';
import { catalogEntryProblems, readCatalogFile, SHIPPED_CATALOG_PATH } from './catalog-file';
import {
  CatalogEntryDto,
  PersonalityDto,
  toCatalogEntryResponse,
  toPersonalityResponse,
} from './dto/personality-response';
import { UpdatePersonalityDto } from './dto/update-personality.dto';
import type { CatalogEntryFile, PersonalityReplies } from './entities/personality-definition';
import type { Personality } from './entities/personality.entity';
import { storedTools, type ToolDefinition, toolProblems } from '../tools/tool-definitions';
import { OrganizationsService } from '../organizations/organizations.service';
import { DEFAULT_LANGUAGE, isLanguage, type Language, searchConfigOf } from './languages';
import {
  type NewPersonality,
  PersonalitiesRepository,
  type PersonalityForReply,
} from './personalities.repository';

export type { PersonalityForReply } from './personalities.repository';

/** A personality as a PMF v1 document carries it (docs/pmf-v1.md), already valid by its schema. */
export interface PersonalityDocument {
  id: string;
  source_slug: string;
  source_version: string;
  name: string;
  description: string;
  traits: string[];
  voice: Record<string, unknown>;
  system_prompt: string;
  language?: string;
  replies?: PersonalityReplies;
}

/** The personality each document entry became, by the entry's index, and how many are new. */
export interface ProvidedPersonalities {
  ids: string[];
  created: number;
}

/** Personalities inserted per statement (11 parameters each). */
const INSERT_BATCH = 500;

/** The field of a catalog entry that a document's personality calls otherwise. */
const DOCUMENT_FIELD: Record<string, string> = { slug: 'source_slug', version: 'source_version' };

/**
 * How long this instance keeps a personality read for a reply. Every `/v1/respond` needs one, and
 * keeping it saves a query per reply (a quarter of a reply's CPU, bench/results/end-users.json).
 * A PATCH or DELETE drops the entry here at once and on the other instances through Redis;
 * without Redis another instance may reply with the old fields for this long. A deleted
 * personality is never replied for after its deletion committed: the exchange's insert then fails
 * on the memories' foreign key, which answers 404.
 */
const REPLY_CACHE_MS = 5_000;
/** Runs of a deletion that PostgreSQL rolled back to end a deadlock, the last one included. */
const DELETE_ATTEMPTS = 3;

@Injectable()
export class PersonalitiesService implements OnApplicationBootstrap {
  private readonly forReply: SharedCache<PersonalityForReply>;
  /** The models a personality may name (OPENAI_ALLOWED_MODELS, contract §25). */
  private readonly allowedModels: ReadonlySet<string>;

  constructor(
    private readonly repository: PersonalitiesRepository,
    private readonly database: Database,
    private readonly clock: Clock,
    private readonly audit: AuditService,
    private readonly webhookEvents: WebhookEventsService,
    private readonly idempotency: IdempotencyService,
    private readonly logger: PinoLogger,
    caches: Caches,
    @Inject(modelsConfig.KEY) models: ConfigType<typeof modelsConfig>,
    private readonly organizations: OrganizationsService,
  ) {
    this.allowedModels = new Set(models.allowed);
    this.logger.setContext(PersonalitiesService.name);
    this.forReply = caches.shared({ channel: 'personalities:changed', ttlMs: REPLY_CACHE_MS });
  }

  /**
   * Seeds the shipped catalog. An entry is written only when it is new or its shipped version is
   * newer than the stored one, so a restart never undoes an operator's CLI import.
   */
  async onApplicationBootstrap(): Promise<void> {
    const shipped = readCatalogFile(SHIPPED_CATALOG_PATH);
    const stored = await this.repository.findCatalogVersions();
    const due = shipped.filter((entry) => {
      const version = stored.get(entry.slug);
      return version === undefined || compareVersions(entry.version, version) > 0;
    });
    if (due.length === 0) return;
    await this.importCatalog(due);
    this.logger.info(
      { entries: due.map((entry) => `${entry.slug}@${entry.version}`) },
      'shipped catalog entries seeded',
    );
  }

  /** Upserts entries by slug, all or none. */
  importCatalog(entries: CatalogEntryFile[]): Promise<void> {
    return this.repository.upsertCatalogEntries(entries, this.clock.now());
  }

  async listCatalog(limit: number, startingAfter?: string): Promise<Page<CatalogEntryDto>> {
    const rows = await this.repository.findCatalogPage(limit + 1, startingAfter);
    return toPage(rows, limit, toCatalogEntryResponse);
  }

  /** The clone shares nothing with the entry: later catalog imports cannot reach it. */
  async cloneFromCatalog(
    organizationId: string,
    slug: string,
    language: Language = DEFAULT_LANGUAGE,
    tools: unknown[] = [],
  ): Promise<PersonalityDto> {
    const id = await this.repository.insertCloneOfCatalogEntry(
      organizationId,
      slug,
      {
        language,
        searchConfig: searchConfigOf(language),
        tools: await this.checkedTools(organizationId, tools),
      },
      this.clock.now(),
    );
    if (!id) throw AppError.notFound('Catalog entry');
    return this.get(organizationId, id);
  }

  /**
   * The personalities of an imported document, in the caller's transaction (docs/pmf-v1.md#import):
   * one whose id is the organization's is used as it is (and locked against a concurrent
   * delete); any other is created from the document's fields under a new id, speaking its
   * `language` (default en), with its `replies`, else those of the catalog entry of its
   * `source_slug`. A created one must be a valid catalog entry; what is not is refused with 400
   * naming the field by JSON pointer under `pointer` (the array's place in the request), the
   * documents being its items from index `first` on (an import hands them on in batches).
   */
  async provideForImport(
    manager: EntityManager,
    organizationId: string,
    documents: PersonalityDocument[],
    pointer: string,
    first = 0,
  ): Promise<ProvidedPersonalities> {
    const known = documents.map((document) =>
      isUUID(document.id) ? document.id.toLowerCase() : undefined,
    );
    const existing = await this.repository.lockInOrganization(manager, organizationId, [
      ...new Set(known.filter((id): id is string => id !== undefined)),
    ]);
    const ids = known.map((id) => (id !== undefined && existing.has(id) ? id : ''));
    const fresh = documents.flatMap((document, index) => (ids[index] ? [] : [{ document, index }]));
    const catalogReplies = await this.repository.findCatalogReplies(manager, [
      ...new Set(fresh.filter((f) => !f.document.replies).map((f) => f.document.source_slug)),
    ]);

    const problems: FieldProblem[] = [];
    const created: NewPersonality[] = [];
    for (const { document, index } of fresh) {
      const at = `${pointer}/${first + index}`;
      const language = document.language ?? DEFAULT_LANGUAGE;
      if (!isLanguage(language)) {
        problems.push({
          field: `${at}/language`,
          problem: 'must be a BCP 47 primary language subtag (ISO 639-1), such as en, de or fr',
        });
      }
      const replies = document.replies ?? catalogReplies.get(document.source_slug);
      if (!replies) {
        problems.push({
          field: `${at}/replies`,
          problem:
            'is required: the personality is new to this organization and no catalog entry has its source_slug',
        });
        continue;
      }
      const definition: CatalogEntryFile = {
        slug: document.source_slug,
        version: document.source_version,
        name: document.name,
        description: document.description,
        traits: document.traits,
        voice: document.voice as unknown as CatalogEntryFile['voice'],
        system_prompt: document.system_prompt,
        replies,
      };
      for (const problem of catalogEntryProblems(definition)) {
        const [, first, rest] = /^\/([^/]*)(.*)$/.exec(problem.field) ?? [];
        const field = first === undefined ? '' : `/${DOCUMENT_FIELD[first] ?? first}${rest}`;
        problems.push({ field: `${at}${field}`, problem: problem.problem });
      }
      const id = randomUUID();
      ids[index] = id;
      created.push({
        id,
        sourceSlug: document.source_slug,
        sourceVersion: document.source_version,
        name: document.name,
        description: document.description,
        traits: document.traits,
        voice: document.voice,
        systemPrompt: document.system_prompt,
        replies,
        language,
        searchConfig: searchConfigOf(language),
      });
    }
    if (problems.length > 0) {
      throw AppError.validation(
        problems.slice(0, MAX_LISTED_PROBLEMS),
        `${problems.length} problem(s) with the personalities the import would create`,
      );
    }
    const at = this.clock.now();
    for (let start = 0; start < created.length; start += INSERT_BATCH) {
      await this.repository.insertMany(
        manager,
        organizationId,
        created.slice(start, start + INSERT_BATCH),
        at,
      );
    }
    return { ids, created: created.length };
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<PersonalityDto>> {
    if (startingAfter) {
      const known =
        isUUID(startingAfter) &&
        (await this.repository.existsInOrganization(organizationId, startingAfter));
      if (!known) {
        throw AppError.validation([
          { field: 'starting_after', problem: 'must be the id of a personality of this list' },
        ]);
      }
    }
    const rows = await this.repository.findPageForOrganization(
      organizationId,
      limit + 1,
      startingAfter,
    );
    return toPage(rows, limit, toPersonalityResponse);
  }

  /** A personality may name only the models the operator allows (OPENAI_ALLOWED_MODELS). */
  private assertAllowedModel(model: string): void {
    if (this.allowedModels.has(model)) return;
    const allowed = [...this.allowedModels];
    throw AppError.validation([
      {
        field: 'model',
        problem:
          allowed.length === 0
            ? 'must be null: this service allows no model to be chosen (OPENAI_ALLOWED_MODELS)'
            : `must be one of the models this service allows: ${allowed.join(', ')}`,
      },
    ]);
  }

  /**
   * A `tools` array as it is stored, or 400 naming each problem (`tools/3/parameters`): the
   * items' shape and schemas, and webhook tools' endpoints, which must be the organization's.
   */
  private async checkedTools(organizationId: string, tools: unknown[]): Promise<ToolDefinition[]> {
    const account = await this.organizations.accountOf(organizationId);
    const problems = await toolProblems({ organizationId, account }, tools, 'personality');
    if (problems.length > 0) throw AppError.validation(problems);
    const valid = tools as ToolDefinition[];
    const endpoints = valid.map((tool) => tool.endpoint_id?.toLowerCase());
    const own = await this.repository.findOwnEndpoints(organizationId, [
      ...new Set(endpoints.filter((id): id is string => id !== undefined)),
    ]);
    const unknown = endpoints.flatMap((id, index) =>
      id !== undefined && !own.has(id)
        ? [
            {
              field: `tools/${index}/endpoint_id`,
              problem: 'must be a webhook endpoint of the organization',
            },
          ]
        : [],
    );
    if (unknown.length > 0) throw AppError.validation(unknown);
    return storedTools(valid);
  }

  async get(organizationId: string, id: string): Promise<PersonalityDto> {
    return toPersonalityResponse(await this.find(organizationId, id));
  }

  async update(
    organizationId: string,
    id: string,
    changes: UpdatePersonalityDto,
  ): Promise<PersonalityDto> {
    if (typeof changes.model === 'string') this.assertAllowedModel(changes.model);
    const tools = changes.tools && (await this.checkedTools(organizationId, changes.tools));
    // Read and saved under the row's lock: concurrent PATCHes of different fields all land, and
    // one racing a DELETE answers 404 rather than bringing the personality back.
    const saved = await this.database.transaction(async (manager) => {
      const personality = await this.repository.lockForUpdate(manager, organizationId, id);
      if (!personality) throw AppError.notFound('Personality');
      if (tools) personality.tools = tools;
      if (changes.name !== undefined) personality.name = changes.name;
      if (changes.description !== undefined) personality.description = changes.description;
      if (changes.traits !== undefined) personality.traits = changes.traits;
      if (changes.voice !== undefined) personality.voice = { ...changes.voice };
      if (changes.system_prompt !== undefined) personality.systemPrompt = changes.system_prompt;
      if (changes.replies !== undefined) personality.replies = { ...changes.replies };
      if (changes.model !== undefined) personality.model = changes.model;
      if (changes.language !== undefined) {
        personality.language = changes.language;
        personality.searchConfig = searchConfigOf(changes.language);
      }
      // The time of the change, once the lock is held: the transaction's own time (TypeORM's
      // default) is before a wait for it, so a PATCH that waited would go back in time.
      personality.updatedAt = this.clock.now();
      return this.repository.save(manager, personality);
    });
    await this.forget(organizationId, id);
    return toPersonalityResponse(saved);
  }

  /**
   * Deletes the personality and what it remembers (its memories, by cascade), with its audit
   * event and the stored answers of its keyed replies in the same transaction; billed months
   * remain.
   */
  async remove(caller: CallerContext, id: string): Promise<void> {
    const { organizationId } = caller;
    // Its cascade takes the memories, then their facts (ON DELETE SET NULL); an erasure of one
    // of its end users takes facts, then memories. When the two meet, PostgreSQL rolls one back:
    // if this one, it runs again (docs/memory.md).
    await this.database.transaction(
      async (manager) => {
        const deleted = await this.repository.deleteInOrganization(manager, organizationId, id);
        if (!deleted) throw AppError.notFound('Personality');
        await this.audit.record(manager, caller, {
          organizationId,
          action: 'personality.deleted',
          target: { type: 'personality', id },
          details: { name: deleted.name, source_slug: deleted.sourceSlug },
        });
        await this.webhookEvents.emit(manager, organizationId, 'personality.deleted', {
          id,
          name: deleted.name,
          source_slug: deleted.sourceSlug,
        });
        // Its conversations go by cascade: so do the stored answers of the replies it spoke.
        await this.idempotency.forgetPersonality(manager, organizationId, id);
      },
      { deadlockAttempts: DELETE_ATTEMPTS },
    );
    // The instances' caches first: this pass may wait on key locks (an erasure's).
    await this.forget(organizationId, id);
    await this.idempotency.forgetPersonalityAfterDeletion(organizationId, id);
  }

  /** The organization's personality as a reply needs it, from this instance's cache if there. */
  findForReply(organizationId: string, id: string): Promise<PersonalityForReply> {
    return this.forReply.get(replyCacheKey(organizationId, id), async () => {
      const found = await this.repository.findForReply(organizationId, id);
      if (!found) throw AppError.notFound('Personality');
      return found;
    });
  }

  /** After a change has committed: no instance replies from the old fields any more. */
  private forget(organizationId: string, id: string): Promise<void> {
    return this.forReply.invalidate(replyCacheKey(organizationId, id));
  }

  private async find(organizationId: string, id: string): Promise<Personality> {
    const found = await this.repository.findInOrganization(organizationId, id);
    if (!found) throw AppError.notFound('Personality');
    return found;
  }
}

function replyCacheKey(organizationId: string, id: string): string {
  return `${organizationId}:${id}`;
}
