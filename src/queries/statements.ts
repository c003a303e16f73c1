import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CallerContext } from '../common/auth/caller';
import { type Sql, sql, withEntries } from '../database/sql';
import type { Meaning } from '../embeddings/fusion';
import type { EntityManager } from 'typeorm';
import { ExchangeComposer } from '../common/reply/exchange-composer';
import type { ReplyAdmission, StoredExchange, StoredVerdict } from '../common/reply/reply-store';
import type { FactsService } from '../memory/facts.service';
import { ReplyMemories } from '../memory/reply-memories.participant';
import { FlaggedExchanges } from '../safety/flagged-exchanges.participant';
import { ReplyBudgets } from '../spend/reply-budgets.admitter';
import { ReplyUsage } from '../usage/reply-usage.participant';
import { rankedChunks } from '../knowledge/knowledge.repository';
import { recallStatement } from '../memory/conversation.repository';
import { memorySearchStatement } from '../memory/memories.repository';
import { reservationReleaseStep } from '../spend/reservation-release.step';

/** The checked-in statements (`npm run sql:generate`), by file under src/queries. */
export const QUERIES_DIR = __dirname;

// Example values: a statement's text depends on its shape only, never on these.
const ORGANIZATION = '00000000-0000-4000-8000-000000000001';
const END_USER = '00000000-0000-4000-8000-000000000002';
const PERSONALITY = '00000000-0000-4000-8000-000000000003';
const AT = new Date('2026-01-01T00:00:00Z');
const SAFE: StoredVerdict = { flagged: false, categories: [], action: 'none' };

interface ReplyShape {
  tokens?: boolean;
  reserved?: boolean;
  flagged?: boolean;
  facts?: number;
}

/**
 * The participants of a reply's statement that the snapshots compose, and the admitters its
 * fake reservation stands for: test/sql-snapshots.e2e-spec.ts fails when the app finds others.
 */
export const SNAPSHOT_PARTICIPANTS = {
  stores: [ReplyMemories, ReplyUsage, FlaggedExchanges],
  admitters: [ReplyBudgets],
};

/** The end user's fact lock, as FactsService.roomFor takes it: room for every fact. */
const ROOM_FOR_FACTS = { roomFor: () => Promise.resolve(10) } as unknown as FactsService;

/**
 * The reply's statement (RespondService.store) for one shape, composed as a reply composes it:
 * the same participants through ExchangeComposer. Spend's admission is represented by its
 * reservation's release; its thresholds and meter events need the organization's budget and
 * billing settings (SpendService.exchangeSteps).
 */
async function replyStatement(shape: ReplyShape): Promise<string> {
  const verdict: StoredVerdict = shape.flagged
    ? { flagged: true, categories: ['self_harm'], action: 'flagged' }
    : SAFE;
  const caller: CallerContext = {
    kind: 'user',
    userId: END_USER,
    organizationId: ORGANIZATION,
    scopes: [],
  };
  const exchange: StoredExchange = {
    caller,
    organizationId: ORGANIZATION,
    endUserId: END_USER,
    userId: 'end-user-1',
    personalityId: PERSONALITY,
    at: AT,
    vocabularyVersion: '1',
    message: { content: 'm', emotion: { name: 'joy', intensity: 0.5 }, safety: verdict },
    reply: {
      content: 'r',
      emotion: { name: 'joy', intensity: 0.5 },
      safety: SAFE,
      toolCalls: null,
    },
    safety: verdict,
    facts: Array.from({ length: shape.facts ?? 0 }, (_, i) => `fact ${i}`),
    tokens: shape.tokens
      ? { promptTokens: 1, completionTokens: 1, cachedTokens: 0, model: 'model-a' }
      : null,
  };
  const reservation: ReplyAdmission = {
    assertRoomFor: () => Promise.resolve(),
    storeExchange: () => [
      reservationReleaseStep({
        organizationId: ORGANIZATION,
        budgets: ['organization'],
        reservationIds: ['00000000-0000-4000-8000-000000000004'],
        estimatedTokens: 1_000,
      }),
    ],
    countTokens: () => [],
    settled: () => undefined,
    release: () => undefined,
  };
  const composer = new ExchangeComposer([
    new ReplyMemories(ROOM_FOR_FACTS),
    new ReplyUsage(),
    new FlaggedExchanges(),
  ]);
  const { steps, underLock } = composer.storeExchange(
    exchange,
    shape.reserved ? [reservation] : [],
  );
  for (const locked of underLock) steps.push(...(await locked({} as EntityManager)));
  return withEntries(steps, sql`SELECT 1`).text;
}

const REPLY_SHAPES: Array<[string, ReplyShape]> = [
  ['without usage tokens', {}],
  ['with usage tokens', { tokens: true }],
  ['with usage tokens and a spend reservation', { tokens: true, reserved: true }],
  ['flagged', { flagged: true }],
  ['with two learned facts', { tokens: true, facts: 2 }],
];

/** The reply's statement for each shape, by title. */
export function replyStatements(): Promise<Array<[string, string]>> {
  return Promise.all(
    REPLY_SHAPES.map(async ([title, shape]): Promise<[string, string]> => [
      title,
      await replyStatement(shape),
    ]),
  );
}

const QUESTION = 'When do you open on Sundays?';
const MEANING: Meaning = {
  model: 'example',
  vector: [0.6, 0.8],
  candidates: 500,
  minSimilarity: 0,
  wholeVectors: 'array',
};

/** Knowledge retrieval (KnowledgeRepository.recall and search, rankedChunks), by title. */
export function knowledgeStatements(): Array<[string, string]> {
  const shapes: Array<[string, Sql]> = [
    [
      'a reply: one personality, by words',
      rankedChunks(ORGANIZATION, PERSONALITY, QUESTION, 4, null),
    ],
    ['a search: every document, by words', rankedChunks(ORGANIZATION, null, QUESTION, 10, null)],
    [
      'a reply: one personality, by words and meaning',
      rankedChunks(ORGANIZATION, PERSONALITY, QUESTION, 4, MEANING),
    ],
  ];
  return shapes.map(([title, statement]) => [title, statement.text]);
}

/**
 * A reply's recall (ConversationRepository.recall) and a memory search (MemoriesRepository.search)
 * by words and meaning, as they are sent once EMBEDDINGS_MODEL is set: the recorded files show them
 * by words alone (respond.service.sql, memories.service.sql), the embeddings being off there.
 */
export function memoryStatements(): Array<[string, string, string]> {
  const limits = { history: 20, recall: 8 };
  return [
    [
      'conversation.repository.sql',
      "ConversationRepository.recall: a reply's recall, by words and meaning",
      recallStatement(ORGANIZATION, 'end-user-1', PERSONALITY, QUESTION, limits, MEANING).text,
    ],
    [
      'memories.repository.sql',
      'MemoriesRepository.search: one personality, by words and meaning',
      memorySearchStatement(ORGANIZATION, END_USER, QUESTION, PERSONALITY, 10, MEANING).text,
    ],
  ];
}

/**
 * Knowledge retrieval where the database has pgvector (migration AddPgvectorColumns): prepared
 * on PGlite by test/services/pgvector.e2e-spec.ts, since the other databases lack the column.
 */
export function pgvectorStatements(): Array<[string, string]> {
  const meaning: Meaning = { ...MEANING, wholeVectors: 'pgvector' };
  return [
    [
      'a reply: one personality, by words and meaning, whole vectors by pgvector',
      rankedChunks(ORGANIZATION, PERSONALITY, QUESTION, 4, meaning).text,
    ],
  ];
}

/** One statement's text, its blank lines and trailing spaces gone, so the files diff cleanly. */
function formatted(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== '')
    .join('\n');
}

/** Every checked-in file's content, by file name. */
export async function renderQueries(): Promise<Map<string, string>> {
  const reply = (await replyStatements()).map(
    ([title, text]) => `-- RespondRepository.storeExchange: ${title}\n${formatted(text)};\n`,
  );
  const knowledge = [...knowledgeStatements(), ...pgvectorStatements()].map(
    ([title, text]) => `-- rankedChunks: ${title}\n${formatted(text)};\n`,
  );
  const files = new Map<string, string>();
  for (const [file, title, text] of memoryStatements()) {
    files.set(
      file,
      `${files.get(file) ?? '-- AUTOGENERATED by npm run sql:generate; do not edit.\n'}\n-- ${title}\n${formatted(text)};\n`,
    );
  }
  return new Map([
    ...files,
    [
      'respond.repository.sql',
      `-- AUTOGENERATED by npm run sql:generate; do not edit.\n\n${reply.join('\n')}`,
    ],
    [
      'knowledge.repository.sql',
      `-- AUTOGENERATED by npm run sql:generate; do not edit.\n\n${knowledge.join('\n')}`,
    ],
  ]);
}

if (require.main === module) {
  void renderQueries().then((files) => {
    for (const [file, content] of files) writeFileSync(join(QUERIES_DIR, file), content);
  });
}
