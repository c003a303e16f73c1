import { setImmediate as nextTurn } from 'node:timers/promises';
import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import type { EntityManager } from 'typeorm';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { memoryConfig } from '../config/memory.config';
import { Database } from '../database/database';
import type { SpooledDocument } from '../common/http/spooled-document';
import { factKey, normalizeFact } from '../memory/dto/fact.dto';
import { EndUsersService } from '../end-users/end-users.service';
import type { MemorySafety, SafetyCategory } from '../safety/safety-categories';
import type { NewMemory } from '../memory/memories.step';
import {
  type PersonalityDocument,
  PersonalitiesService,
} from '../personalities/personalities.service';
import { LocalSafetyClassifier } from '../safety/local/local-safety-classifier';
import { VocabulariesService } from '../vocabularies/vocabularies.service';
import type { ImportResultDto } from './dto/import-result.dto';
import { type CheckedImport, ImportChecker } from './import-rules';
import { ImportRepository } from './import.repository';
import { piecesOf } from './pmf-pieces';
import { type PmfArray, type PmfFact, type PmfMemory, PmfV1Validator } from './pmf-v1';

/**
 * Memories per statement: 10 parameters each, well under PostgreSQL's 65,535; and at most
 * BATCH_CHARACTERS of text, so that a batch of long messages stays a few megabytes.
 */
const MEMORY_BATCH = 1_000;
/** Facts per statement (7 parameters each). */
const FACT_BATCH = 1_000;
/** Personalities per provideForImport call. */
const PERSONALITY_BATCH = 100;
/** Characters of text a batch holds at most, whatever its count. */
const BATCH_CHARACTERS = 2 * 1_048_576;
/**
 * Words a batch of memories holds at most, its first memory whatever it holds: a trigger writes
 * a posting per distinct word of each memory in the same statement (about 27 µs each here), and
 * 1,400 exported memories of 600 words, well within BATCH_CHARACTERS, ran past the statement
 * timeout, so an export the service made could not be imported again (found by review). As
 * the retention purge's PURGE_WORDS_PER_BATCH; the words are counted as runs of letters and
 * digits, at least the lexemes PostgreSQL's parser finds in them but for hyphenated compounds.
 */
const BATCH_WORDS = 20_000;

/** The runs of letters and digits in `text`: what BATCH_WORDS counts. */
function wordsIn(text: string): number {
  return text.match(/[\p{L}\p{N}]+/gu)?.length ?? 0;
}
/**
 * The classifier works synchronously (about 0.6 µs a character): after this much text the import
 * lets the event loop run, so a batch of long messages stalls other requests for tens of
 * milliseconds, not the second its 2 MiB would take.
 */
const CLASSIFIED_CHARACTERS_PER_TURN = 64 * 1_024;

/** The members of a PMF v1 document's root object that are not arrays of items. */
const ROOT_VALUES = new Set(['format', 'version', 'exported_at', 'end_user']);

const endUserExists = () =>
  new AppError(
    'end_user_exists',
    'The organization already has an end user with this user_id; an import creates a new one',
  );

/** What an imported memory's verdict is: its classification; no action was taken on it. */
function importedVerdict(categories: SafetyCategory[]): MemorySafety {
  return {
    flagged: categories.length > 0,
    categories,
    action: categories.length > 0 ? 'flagged' : 'none',
  };
}

/**
 * POST /v1/end-users/import: a PMF v1 document back into an organization (docs/pmf-v1.md#import).
 * The document arrives spooled to a temporary file (ReadsDocumentBody) and is read from it a part
 * at a time, never whole: checked completely first (ImportChecker: the published schema a part at
 * a time, then the rules the API holds), then written in one transaction: the end user (whose
 * user_id must be new: the unique constraint decides, under any concurrency), the personalities
 * it needs, its memories in their order, each with the verdict of this service's safety
 * classifier, and its facts pointing at their messages' new ids. All or nothing. Relationships are
 * not imported and nothing is counted: a relationship counts when a reply is written, and an
 * import writes none.
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
    private readonly classifier: LocalSafetyClassifier,
    private readonly clock: Clock,
  ) {
    this.factsLimit = memory.factsLimit;
  }

  async import(caller: CallerContext, document: SpooledDocument): Promise<ImportResultDto> {
    const now = this.clock.now();
    const checked = await this.check(document, now);
    // Refused before the work when taken already; the naming at the end decides under a race.
    const refusal = await this.refusalIfTaken(caller.organizationId, checked.endUser.user_id);
    if (refusal) throw refusal;
    return this.database.transaction((manager) =>
      this.write(manager, caller.organizationId, document, checked, now),
    );
  }

  /** Every part of the document through the checks, in the order they depend on each other. */
  private async check(document: SpooledDocument, now: Date): Promise<CheckedImport> {
    const checker = new ImportChecker(this.validator, {
      now,
      factsLimit: this.factsLimit,
      emotionNamesOf: (version) => this.vocabularies.emotionNamesOf(version),
      emotionNamesOfEveryVersion: this.vocabularies.emotionNamesOfEveryVersion(),
    });
    const root: Record<string, unknown> = {};
    for (const name of document.names()) {
      const range = document.member(name)!;
      if (range.isArray || !ROOT_VALUES.has(name)) {
        // An array's items are checked one by one below; an unknown member only needs its name.
        root[name] = range.isArray ? [] : null;
        continue;
      }
      for await (const piece of piecesOf(document, range)) {
        if ('value' in piece) root[name] = piece.value;
        else checker.unreadable(`/${name}${piece.at}`, piece.problem);
      }
    }
    checker.root(root);
    const each = async (array: PmfArray, check: (index: number, value: unknown) => void) => {
      const range = document.member(array);
      if (!range?.isArray) return;
      for await (const piece of piecesOf(document, range)) {
        if ('value' in piece) check(piece.index!, piece.value);
        else checker.unreadable(`/${array}/${piece.index}${piece.at}`, piece.problem);
      }
    };
    await each('personalities', (index, value) => checker.personality(index, value));
    await each('relationships', (index, value) => checker.relationship(index, value));
    const facts = document.member('facts');
    if (facts?.isArray) {
      for await (const piece of piecesOf(document, facts)) {
        if ('value' in piece) checker.factNamesMemory(piece.value);
      }
    }
    await each('memories', (index, value) => checker.memory(index, value));
    await each('facts', (index, value) => checker.fact(index, value));
    return checker.finish();
  }

  /**
   * The items of a checked array, in batches of at most `count` and BATCH_CHARACTERS, and, with
   * `wordsOf`, of at most BATCH_WORDS (a batch is closed before the item that would pass it).
   */
  private async *batches<T>(
    document: SpooledDocument,
    array: PmfArray,
    count: number,
    wordsOf?: (item: T) => number,
  ): AsyncGenerator<T[]> {
    const range = document.member(array);
    if (!range?.isArray) return;
    let batch: T[] = [];
    let characters = 0;
    let words = 0;
    for await (const piece of piecesOf(document, range)) {
      // Checked before: every piece was built, and is a valid item.
      const { value, characters: size } = piece as { value: T; characters: number };
      const itemWords = wordsOf?.(value) ?? 0;
      if (batch.length > 0 && words + itemWords > BATCH_WORDS) {
        yield batch;
        batch = [];
        characters = 0;
        words = 0;
      }
      batch.push(value);
      characters += size;
      words += itemWords;
      if (batch.length === count || characters >= BATCH_CHARACTERS) {
        yield batch;
        batch = [];
        characters = 0;
        words = 0;
      }
    }
    if (batch.length > 0) yield batch;
  }

  private async write(
    manager: EntityManager,
    organizationId: string,
    document: SpooledDocument,
    checked: CheckedImport,
    now: Date,
  ): Promise<ImportResultDto> {
    const userId = checked.endUser.user_id;
    const endUser = {
      organizationId,
      userId,
      metadataJson: JSON.stringify(checked.endUser.metadata),
      createdAt: new Date(checked.endUser.created_at),
      updatedAt: now,
    };
    // Unnamed until the end: nothing waits on this transaction for the user_id (end-users.step).
    const endUserId = await this.repository.insertUnnamedEndUser(manager, endUser);

    // The document's personality id → the one its memories are written with.
    const personalityOf = new Map<string, string>();
    let personalitiesCreated = 0;
    let first = 0;
    for await (const batch of this.batches<PersonalityDocument>(
      document,
      'personalities',
      PERSONALITY_BATCH,
    )) {
      const provided = await this.personalities.provideForImport(
        manager,
        organizationId,
        batch,
        '/personalities',
        first,
      );
      batch.forEach((p, index) => personalityOf.set(p.id.toLowerCase(), provided.ids[index]));
      personalitiesCreated += provided.created;
      first += batch.length;
    }

    // The new ids of the memories facts were learned from.
    const memoryIds = new Map<string, string>();
    let classifiedThisTurn = 0;
    for await (const batch of this.batches<PmfMemory>(
      document,
      'memories',
      MEMORY_BATCH,
      (memory) => wordsIn(memory.content),
    )) {
      const rows: NewMemory[] = [];
      for (const memory of batch) {
        classifiedThisTurn += memory.content.length;
        if (classifiedThisTurn >= CLASSIFIED_CHARACTERS_PER_TURN) {
          classifiedThisTurn = 0;
          await nextTurn();
        }
        rows.push({
          organizationId,
          endUserId,
          personalityId: personalityOf.get(memory.personality_id.toLowerCase())!,
          role: memory.role,
          content: memory.content,
          emotion: memory.emotion?.name ?? null,
          intensity: memory.emotion?.intensity ?? null,
          vocabularyVersion: memory.vocabulary_version,
          createdAt: new Date(memory.created_at),
          // This service's classifier decides, never the document (contract §29).
          safety: importedVerdict((await this.classifier.classify(memory.content)).categories),
          toolCalls: memory.tool_calls ?? null,
        });
      }
      const ids = await this.repository.insertMemories(manager, rows);
      batch.forEach((memory, index) => {
        if (checked.namedMemories.has(memory.id)) memoryIds.set(memory.id, ids[index]);
      });
    }

    let factsImported = 0;
    for await (const batch of this.batches<PmfFact>(document, 'facts', FACT_BATCH)) {
      factsImported += await this.repository.insertFacts(
        manager,
        { organizationId, endUserId },
        batch.map((fact) => {
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

    if (!(await this.repository.nameEndUser(manager, endUserId, endUser))) {
      // Erased since the naming failed: it was taken then, which is what the client is told.
      throw (await this.refusalIfTaken(organizationId, userId)) ?? endUserExists();
    }
    return {
      user_id: userId,
      personalities_created: personalitiesCreated,
      memories_imported: checked.memories,
      facts_imported: factsImported,
    };
  }

  /** Why the user_id is taken (under deletion, with when it frees up, or simply existing), if it is. */
  private async refusalIfTaken(
    organizationId: string,
    userId: string,
  ): Promise<AppError | undefined> {
    const existing = await this.endUsers.findRow(organizationId, userId).catch((error: unknown) => {
      if (error instanceof AppError && error.code === 'not_found') return undefined;
      throw error;
    });
    if (!existing) return undefined;
    return existing.status === 'deleting' ? this.endUsers.underDeletion(existing) : endUserExists();
  }
}
