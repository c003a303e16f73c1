import { AppError, type FieldProblem } from '../common/errors/app-error';
import { MAX_LISTED_PROBLEMS } from '../common/validation/json-schema-problems';
import { CONTROL_CHARACTER } from '../common/validation/no-control-characters';
import { FACT_MAX_CHARACTERS, factKey, normalizeFact } from '../end-users/dto/fact.dto';
import {
  IMPORTED_REPLY_MAX_CHARACTERS,
  USER_MESSAGE_MAX_CHARACTERS,
} from '../end-users/dto/memory.dto';
import { metadataProblem, userIdProblem } from '../end-users/dto/user-id';
import type { PmfDocument } from './pmf-v1';

/** What the rules of an import depend on besides the document. */
export interface ImportContext {
  /** The clock's time: nothing of the document may be later. */
  now: Date;
  /** MEMORY_FACTS_LIMIT. */
  factsLimit: number;
  /** The emotion names of a published vocabulary version; undefined for an unknown version. */
  emotionNamesOf(version: string): ReadonlySet<string> | undefined;
}

/** Problems, in document order; past MAX_LISTED_PROBLEMS they are only counted. */
class Problems {
  readonly listed: FieldProblem[] = [];
  total = 0;

  add(field: string, problem: string): void {
    this.total++;
    if (this.listed.length < MAX_LISTED_PROBLEMS) this.listed.push({ field, problem });
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

/**
 * The service's own rules for a document the schema accepted (docs/pmf-v1.md#import): the
 * limits the API holds everywhere else (user_id, metadata, message and fact lengths,
 * MEMORY_FACTS_LIMIT), what refers to what inside the document (memory ids unique, every memory's
 * personality and every fact's memory in the document), published vocabulary versions and their
 * emotions, and no time after the clock's. Throws 400 `validation_failed` with the problems by
 * JSON pointer; the facts' contents are answered normalised (as they will be stored), by index.
 */
export function checkImport(document: PmfDocument, context: ImportContext): void {
  const problems = new Problems();
  const now = context.now.getTime();
  const checkTime = (field: string, iso: string) => {
    const at = Date.parse(iso);
    if (at < EPOCH) problems.add(field, 'must be in the years 1970..9999');
    else if (at > now) problems.add(field, 'must not be in the future');
  };

  const userIdIssue = userIdProblem(document.end_user.user_id);
  if (userIdIssue) problems.add('/end_user/user_id', userIdIssue);
  const metadataIssue = metadataProblem(document.end_user.metadata);
  if (metadataIssue) problems.add('/end_user/metadata', metadataIssue);
  checkTime('/end_user/created_at', document.end_user.created_at);

  const personalities = new Map<string, number>();
  document.personalities.forEach((personality, index) => {
    const id = personality.id.toLowerCase();
    const first = personalities.get(id);
    if (first !== undefined) {
      problems.add(`/personalities/${index}/id`, `repeats the id of /personalities/${first}`);
    } else {
      personalities.set(id, index);
    }
  });

  const memories = new Map<string, number>();
  document.memories.forEach((memory, index) => {
    const at = `/memories/${index}`;
    const first = memories.get(memory.id);
    if (first !== undefined) problems.add(`${at}/id`, `repeats the id of /memories/${first}`);
    else memories.set(memory.id, index);
    if (!personalities.has(memory.personality_id.toLowerCase())) {
      problems.add(`${at}/personality_id`, 'names no personality of the document');
    }
    if (memory.role === 'user') {
      if (memory.content.length === 0) problems.add(`${at}/content`, 'must not be empty');
      else if (longerThan(memory.content, USER_MESSAGE_MAX_CHARACTERS)) {
        problems.add(
          `${at}/content`,
          `must be at most ${USER_MESSAGE_MAX_CHARACTERS} characters (a user's message)`,
        );
      }
    } else if (longerThan(memory.content, IMPORTED_REPLY_MAX_CHARACTERS)) {
      problems.add(
        `${at}/content`,
        `must be at most ${IMPORTED_REPLY_MAX_CHARACTERS} characters (a personality's message)`,
      );
    }
    if (memory.vocabulary_version !== null) {
      const emotions = context.emotionNamesOf(memory.vocabulary_version);
      if (!emotions) {
        problems.add(
          `${at}/vocabulary_version`,
          'is not a published emotion vocabulary version (GET /v1/vocabularies/emotions/changelog)',
        );
      } else if (memory.emotion && !emotions.has(memory.emotion.name)) {
        problems.add(`${at}/emotion/name`, 'is not an emotion of its vocabulary version');
      }
    }
    checkTime(`${at}/created_at`, memory.created_at);
  });

  const facts = document.facts ?? [];
  if (facts.length > context.factsLimit) {
    problems.add(
      '/facts',
      `holds ${facts.length} facts; an end user holds at most ${context.factsLimit} (MEMORY_FACTS_LIMIT)`,
    );
  }
  const keys = new Map<string, number>();
  facts.forEach((fact, index) => {
    const at = `/facts/${index}`;
    const content = normalizeFact(fact.content);
    if (content.length === 0) problems.add(`${at}/content`, 'must not be empty');
    else if (longerThan(content, FACT_MAX_CHARACTERS)) {
      problems.add(`${at}/content`, `must be at most ${FACT_MAX_CHARACTERS} characters`);
    } else if (CONTROL_CHARACTER.test(content)) {
      problems.add(`${at}/content`, 'must not contain control characters');
    }
    const key = factKey(content);
    const first = keys.get(key);
    if (first !== undefined) {
      problems.add(`${at}/content`, `repeats /facts/${first} (case and white space aside)`);
    } else {
      keys.set(key, index);
    }
    if (fact.memory_id !== null && !memories.has(fact.memory_id)) {
      problems.add(`${at}/memory_id`, 'names no memory of the document');
    }
    checkTime(`${at}/created_at`, fact.created_at);
    checkTime(`${at}/updated_at`, fact.updated_at);
  });

  if (problems.total > 0) {
    throw AppError.validation(
      problems.listed,
      `The document cannot be imported: ${problems.total} problem(s)`,
    );
  }
}
