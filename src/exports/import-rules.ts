import { createHash } from 'node:crypto';
import { plainToInstance } from 'class-transformer';
import { validateSync } from 'class-validator';
import { AppError, type FieldProblem } from '../common/errors/app-error';
import { MAX_LISTED_PROBLEMS, pointerToken } from '../common/validation/json-schema-problems';
import { CONTROL_CHARACTER } from '../common/validation/no-control-characters';
import { hasVisibleText } from '../common/validation/visible-text';
import {
  jsonDepth,
  MAX_JSON_DEPTH,
  shapeProblem,
  noWidthSpent,
  widthExcess,
  type WidthSpent,
} from '../common/validation/untrusted-json';
import { toFieldProblems } from '../common/validation/validation.pipe';
import { FACT_MAX_CHARACTERS, factKey, normalizeFact } from '../memory/dto/fact.dto';
import {
  IMPORTED_REPLY_MAX_CHARACTERS,
  USER_MESSAGE_MAX_CHARACTERS,
} from '../memory/dto/memory.dto';
import { metadataProblem, newUserIdProblem } from '../end-users/dto/user-id';
import { MAX_OUTPUT_BYTES } from '../tools/webhook-tool-caller';
import { UpdatePersonalityDto } from '../personalities/dto/update-personality.dto';
import type { PersonalityDocument } from '../personalities/personalities.service';
import type {
  PmfArray,
  PmfEndUser,
  PmfFact,
  PmfMemory,
  PmfV1Validator,
  ProblemList,
} from './pmf-v1';

/** What the rules of an import depend on besides the document. */
export interface ImportContext {
  /** The clock's time: nothing of the document may be later. */
  now: Date;
  /** MEMORY_FACTS_LIMIT. */
  factsLimit: number;
  /** The emotion names of a published vocabulary version; undefined for an unknown version. */
  emotionNamesOf(version: string): ReadonlySet<string> | undefined;
  /**
   * The emotion names of every published version: the names a memory that names no version may
   * carry (the same whichever version is newest, so an export always imports again).
   */
  emotionNamesOfEveryVersion: ReadonlySet<string>;
}

/** Problems, in document order; past MAX_LISTED_PROBLEMS they are only counted. */
class Problems {
  listed: FieldProblem[] = [];
  total = 0;

  add(field: string, problem: string): void {
    this.total++;
    if (this.listed.length < MAX_LISTED_PROBLEMS) this.listed.push({ field, problem });
  }

  addAll({ listed, total }: ProblemList): void {
    for (const { field, problem } of listed) this.add(field, problem);
    this.total += total - listed.length;
  }

  /** A problem of the whole document, listed before those of its parts. */
  addFirst(field: string, problem: string): void {
    this.total++;
    this.listed = [{ field, problem }, ...this.listed].slice(0, MAX_LISTED_PROBLEMS);
  }
}

/** Characters (code points), counted only as far as `max` + 1: an emoji counts once. */
function longerThan(text: string, max: number): boolean {
  if (text.length <= max) return false;
  let characters = 0;
  for (const _ of text) if (++characters > max) return true;
  return false;
}

/** The earliest time the API takes (contract §14: years 1970..9999). */
const EPOCH = Date.UTC(1970, 0, 1);

/** Personalities a document may hold: what an import keeps of them is bounded by it. */
export const MAX_DOCUMENT_PERSONALITIES = 1_000;

/**
 * The memory ids of a document seen so far, each as a 64-bit digest (the first 8 bytes of its
 * SHA-256) in an open-addressing table of typed arrays: 24 bytes per id at most, whatever its
 * length, where a Set of strings takes 60 and more. Two ids with one digest would be taken for a
 * repeat; at 64 bits, the odds for a million ids are about 1 in 30 million.
 */
export class SeenIds {
  private high = new Uint32Array(1_024);
  private low = new Uint32Array(1_024);
  /** index + 1 of the memory that holds the slot; 0: empty. */
  private holder = new Int32Array(1_024);
  private size = 0;

  /** Where `id` was first seen; undefined when it is new, and it is now seen at `index`. */
  firstIndex(id: string, index: number): number | undefined {
    if ((this.size + 1) * 2 > this.holder.length) this.grow();
    const digest = createHash('sha256').update(id).digest();
    const high = digest.readUInt32LE(0);
    const low = digest.readUInt32LE(4);
    const slot = this.find(high, low);
    if (this.holder[slot] !== 0) return this.holder[slot] - 1;
    this.high[slot] = high;
    this.low[slot] = low;
    this.holder[slot] = index + 1;
    this.size++;
    return undefined;
  }

  /** The slot holding the digest, or the empty one where it goes (linear probing). */
  private find(high: number, low: number): number {
    const mask = this.holder.length - 1;
    let slot = low & mask;
    while (this.holder[slot] !== 0 && (this.high[slot] !== high || this.low[slot] !== low)) {
      slot = (slot + 1) & mask;
    }
    return slot;
  }

  private grow(): void {
    const { high, low, holder } = this;
    this.high = new Uint32Array(holder.length * 2);
    this.low = new Uint32Array(holder.length * 2);
    this.holder = new Int32Array(holder.length * 2);
    for (let slot = 0; slot < holder.length; slot++) {
      if (holder[slot] === 0) continue;
      const to = this.find(high[slot], low[slot]);
      this.high[to] = high[slot];
      this.low[to] = low[slot];
      this.holder[to] = holder[slot];
    }
  }
}

/** What the write needs of a document the checks passed. */
export interface CheckedImport {
  endUser: PmfEndUser;
  memories: number;
  facts: number;
  /** Ids of the document's memories that a fact was learned from: the write keeps their new ids. */
  namedMemories: ReadonlySet<string>;
}

/** A personality's fields as PATCH /v1/personalities/{id} takes them (the rules of the API). */
function asPatch(personality: PersonalityDocument): Record<string, unknown> {
  const { name, description, traits, voice, system_prompt, replies, language } = personality;
  return { name, description, traits, voice, system_prompt, replies, language };
}

/**
 * The service's checks of a PMF v1 document (docs/pmf-v1.md#import), fed its parts in this order
 * as they are read: the root object (its arrays empty), each personality, each relationship, the
 * memory ids the facts name (`factNamesMemory`), each memory, each fact; then `finish`. Each part
 * is checked against its part of the published schema, then, if it passed, against the rules the
 * API holds everywhere else: user_id, metadata, a personality's fields as PATCH takes them,
 * message and fact lengths, MEMORY_FACTS_LIMIT; what refers to what inside the document (memory
 * ids unique, every memory's personality and every fact's memory in the document), published
 * vocabulary versions and their emotions, and no time after the clock's.
 *
 * What it keeps is small: the personalities' ids (at most MAX_DOCUMENT_PERSONALITIES), the facts'
 * keys and named memories (at most MEMORY_FACTS_LIMIT facts are looked at), and 24 bytes per
 * memory for its id (SeenIds).
 */
export class ImportChecker {
  private readonly problems = new Problems();
  private readonly now: number;
  private endUser: PmfEndUser | undefined;
  private readonly personalities = new Map<string, number>();
  private personalityCount = 0;
  /** What the personalities checked so far have spent of the body's bounds (widthExcess). */
  private readonly personalityWidth: WidthSpent = noWidthSpent();
  private memoryCount = 0;
  private readonly memoryIds = new SeenIds();
  private hasPersonalities = false;
  private hasMemories = false;
  /** The memory ids facts name, and whether the document holds them. */
  private readonly named = new Map<string, boolean>();
  private readonly factKeys = new Map<string, number>();
  private factCount = 0;

  constructor(
    private readonly validator: PmfV1Validator,
    private readonly context: ImportContext,
  ) {
    this.now = context.now.getTime();
  }

  /** A part that could not be read (too large, a string too long): `at` is its pointer. */
  unreadable(at: string, problem: string): void {
    this.problems.add(at, problem);
  }

  root(root: Record<string, unknown>): void {
    // An array the root lacks is named there; what would refer into it is not named again.
    this.hasPersonalities = Array.isArray(root.personalities);
    this.hasMemories = Array.isArray(root.memories);
    const problems = this.validator.rootProblems(root);
    this.problems.addAll(problems);
    if (problems.listed.some(({ field }) => field.startsWith('/end_user'))) return;
    if (problems.total > problems.listed.length) return;
    const endUser = root.end_user as PmfEndUser | undefined;
    if (!endUser) return;
    const userIdIssue = newUserIdProblem(endUser.user_id);
    if (userIdIssue) this.problems.add('/end_user/user_id', userIdIssue);
    const metadataIssue = metadataProblem(endUser.metadata);
    if (metadataIssue) this.problems.add('/end_user/metadata', metadataIssue);
    this.checkTime('/end_user/created_at', endUser.created_at);
    this.endUser = endUser;
  }

  personality(index: number, value: unknown): void {
    if (++this.personalityCount > MAX_DOCUMENT_PERSONALITIES) return;
    const at = `/personalities/${index}`;
    // Its memories name it by id even when another of its fields is wrong: one problem, not many.
    const id = (value as { id?: unknown } | null)?.id;
    if (typeof id === 'string') {
      const first = this.personalities.get(id.toLowerCase());
      if (first !== undefined) {
        this.problems.add(`${at}/id`, `repeats the id of /personalities/${first}`);
      } else {
        this.personalities.set(id.toLowerCase(), index);
      }
    }
    if (!this.valid('personalities', index, value)) return;
    // The copy below costs the square of an object's keys: a `voice` of 20,000 keys (its schema
    // leaves it open) took 0.2 s of the event loop, a document's 80 such 16 s (review). PATCH's
    // body is refused so before it is parsed; a document's personalities share one budget, or
    // 500 of four 999-key objects would cost as much again (review of the change).
    const wide = widthExcess(value, this.personalityWidth);
    if (wide) return this.problems.add(at, shapeProblem(wide));
    const personality = value as PersonalityDocument;
    // The rules PATCH /v1/personalities/{id} holds (its DTO's), with the document's pointers.
    const patch = plainToInstance(UpdatePersonalityDto, asPatch(personality));
    const errors = validateSync(patch, { whitelist: true, forbidNonWhitelisted: true });
    for (const { field, problem } of toFieldProblems(errors)) {
      this.problems.add(`${at}/${field.split('.').map(pointerToken).join('/')}`, problem);
    }
  }

  relationship(index: number, value: unknown): void {
    this.valid('relationships', index, value);
  }

  /** Before the memories: a fact's memory_id, so that the memories pass can say if it is there. */
  factNamesMemory(fact: unknown): void {
    if (this.named.size >= this.context.factsLimit) return;
    const memoryId = (fact as { memory_id?: unknown } | null)?.memory_id;
    if (typeof memoryId === 'string') this.named.set(memoryId, false);
  }

  memory(index: number, value: unknown): void {
    this.memoryCount++;
    const at = `/memories/${index}`;
    // Facts name it by id even when another of its fields is wrong: one problem, not two.
    const id = (value as { id?: unknown } | null)?.id;
    if (typeof id === 'string') {
      const first = this.memoryIds.firstIndex(id, index);
      if (first !== undefined)
        this.problems.add(`${at}/id`, `repeats the id of /memories/${first}`);
      if (this.named.has(id)) this.named.set(id, true);
    }
    if (!this.valid('memories', index, value)) return;
    const memory = value as PmfMemory;
    if (this.hasPersonalities && !this.personalities.has(memory.personality_id.toLowerCase())) {
      this.problems.add(`${at}/personality_id`, 'names no personality of the document');
    }
    if (memory.role === 'user') {
      if (memory.content.length === 0) this.problems.add(`${at}/content`, 'must not be empty');
      else if (longerThan(memory.content, USER_MESSAGE_MAX_CHARACTERS)) {
        this.problems.add(
          `${at}/content`,
          `must be at most ${USER_MESSAGE_MAX_CHARACTERS} characters (a user's message)`,
        );
      }
    } else if (longerThan(memory.content, IMPORTED_REPLY_MAX_CHARACTERS)) {
      this.problems.add(
        `${at}/content`,
        `must be at most ${IMPORTED_REPLY_MAX_CHARACTERS} characters (a personality's message)`,
      );
    }
    if (memory.vocabulary_version !== null) {
      const emotions = this.context.emotionNamesOf(memory.vocabulary_version);
      if (!emotions) {
        this.problems.add(
          `${at}/vocabulary_version`,
          'is not a published emotion vocabulary version (GET /v1/vocabularies/emotions/changelog)',
        );
      } else if (memory.emotion && !emotions.has(memory.emotion.name)) {
        this.problems.add(`${at}/emotion/name`, 'is not an emotion of its vocabulary version');
      }
    } else if (
      memory.emotion &&
      !this.context.emotionNamesOfEveryVersion.has(memory.emotion.name)
    ) {
      this.problems.add(
        `${at}/emotion/name`,
        'is not an emotion of any vocabulary version (the memory names no vocabulary_version)',
      );
    }
    // A tool's output has the bound the API gives it (a client's, a webhook's), and its
    // arguments the same (the model's, which ENGINE_MAX_TOKENS keeps far below it): both are
    // stored with the memory and sent back with every list and export.
    memory.tool_calls?.forEach((call, callIndex) => {
      for (const part of ['arguments', 'output'] as const) {
        if (Buffer.byteLength(JSON.stringify(call[part]) ?? '') > MAX_OUTPUT_BYTES) {
          this.problems.add(
            `${at}/tool_calls/${callIndex}/${part}`,
            `must be at most ${MAX_OUTPUT_BYTES} bytes serialised (a tool's ${part})`,
          );
        } else if (jsonDepth(call[part]) > MAX_JSON_DEPTH) {
          // A model's arguments nest this deep at most (a webhook's output one less: its body
          // `{"output": …}` has the bound).
          this.problems.add(
            `${at}/tool_calls/${callIndex}/${part}`,
            `must not nest deeper than ${MAX_JSON_DEPTH} levels (a tool's ${part})`,
          );
        }
      }
    });
    this.checkTime(`${at}/created_at`, memory.created_at);
  }

  fact(index: number, value: unknown): void {
    // Past the limit the document is refused (finish): the rest is only counted.
    if (++this.factCount > this.context.factsLimit) return;
    if (!this.valid('facts', index, value)) return;
    const fact = value as PmfFact;
    const at = `/facts/${index}`;
    const content = normalizeFact(fact.content);
    // The API's 500 whatever the source: a learned fact (200 when learned) may have been corrected
    // at length with PATCH since, and an import takes back what an export gave.
    if (content.length === 0) this.problems.add(`${at}/content`, 'must not be empty');
    else if (!hasVisibleText(content)) {
      this.problems.add(`${at}/content`, 'must hold a visible character, not only invisible ones');
    } else if (longerThan(content, FACT_MAX_CHARACTERS)) {
      this.problems.add(`${at}/content`, `must be at most ${FACT_MAX_CHARACTERS} characters`);
    } else if (CONTROL_CHARACTER.test(content)) {
      this.problems.add(`${at}/content`, 'must not contain control characters');
    }
    const key = factKey(content);
    const first = this.factKeys.get(key);
    if (first !== undefined) {
      this.problems.add(`${at}/content`, `repeats /facts/${first} (case and white space aside)`);
    } else {
      this.factKeys.set(key, index);
    }
    if (this.hasMemories && fact.memory_id !== null && !this.named.get(fact.memory_id)) {
      this.problems.add(`${at}/memory_id`, 'names no memory of the document');
    }
    this.checkTime(`${at}/created_at`, fact.created_at);
    this.checkTime(`${at}/updated_at`, fact.updated_at);
  }

  /**
   * What the write needs; else 400 `validation_failed` naming the first MAX_LISTED_PROBLEMS
   * problems by JSON pointer, the message giving how many there are.
   */
  finish(): CheckedImport {
    if (this.personalityCount > MAX_DOCUMENT_PERSONALITIES) {
      this.problems.addFirst(
        '/personalities',
        `holds ${this.personalityCount} personalities; a document holds at most ${MAX_DOCUMENT_PERSONALITIES}`,
      );
    }
    if (this.factCount > this.context.factsLimit) {
      this.problems.addFirst(
        '/facts',
        `holds ${this.factCount} facts; an end user holds at most ${this.context.factsLimit} (MEMORY_FACTS_LIMIT)`,
      );
    }
    if (this.problems.total > 0 || !this.endUser) {
      throw AppError.validation(
        this.problems.listed,
        `The document cannot be imported: ${this.problems.total} problem(s)`,
      );
    }
    return {
      endUser: this.endUser,
      memories: this.memoryCount,
      facts: this.factCount,
      namedMemories: new Set(this.named.keys()),
    };
  }

  /** The part against its part of the schema; its problems are added. */
  private valid(array: PmfArray, index: number, value: unknown): boolean {
    const problems = this.validator.itemProblems(array, index, value);
    this.problems.addAll(problems);
    return problems.total === 0;
  }

  private checkTime(field: string, iso: string): void {
    const at = Date.parse(iso);
    // The format admits what no Date holds (a leap second, 23:59:60): NaN passes both bounds.
    if (!Number.isFinite(at)) this.problems.add(field, 'must be a time a clock can show');
    else if (at < EPOCH) this.problems.add(field, 'must be in the years 1970..9999');
    else if (at > this.now) this.problems.add(field, 'must not be in the future');
  }
}
