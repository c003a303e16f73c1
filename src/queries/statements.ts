import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { CallerContext } from '../common/auth/caller';
import { type Sql, sql, type WithEntry, withEntries } from '../database/sql';
import type { MemorySafety } from '../safety/safety-categories';
import type { Meaning } from '../embeddings/fusion';
import { learnedFactsStep } from '../memory/facts.step';
import { memoriesInsertStep } from '../memory/memories.step';
import { rankedChunks } from '../knowledge/knowledge.repository';
import { flaggedExchangeSteps } from '../respond/flagged-exchange.step';
import { reservationReleaseStep } from '../spend/reservation-release.step';
import { relationshipActivityStep, tokenUsageStep } from '../usage/usage.steps';

/** The checked-in statements (`npm run sql:generate`), by file under src/queries. */
export const QUERIES_DIR = __dirname;

// Example values: a statement's text depends on its shape only, never on these.
const ORGANIZATION = '00000000-0000-4000-8000-000000000001';
const END_USER = '00000000-0000-4000-8000-000000000002';
const PERSONALITY = '00000000-0000-4000-8000-000000000003';
const AT = new Date('2026-01-01T00:00:00Z');
const SAFE: MemorySafety = { flagged: false, categories: [], action: 'none' };

interface ReplyShape {
  tokens?: boolean;
  reserved?: boolean;
  flagged?: boolean;
  facts?: number;
}

/**
 * The reply's statement (RespondService.store) for one shape, built by the same steps in the same
 * order. Spend's thresholds and meter events are left out: they need the organization's budget and
 * billing settings (SpendService.exchangeSteps).
 */
function replyStatement(shape: ReplyShape): string {
  const common = {
    organizationId: ORGANIZATION,
    endUserId: END_USER,
    personalityId: PERSONALITY,
    vocabularyVersion: '1',
    createdAt: AT,
  };
  const memories = memoriesInsertStep([
    { ...common, role: 'user', content: 'm', emotion: 'joy', intensity: 0.5, safety: SAFE },
    { ...common, role: 'personality', content: 'r', emotion: 'joy', intensity: 0.5, safety: SAFE },
  ]);
  const relationship = relationshipActivityStep({
    organizationId: ORGANIZATION,
    endUserId: END_USER,
    personalityId: PERSONALITY,
    at: AT,
  });
  const steps: WithEntry[] = [memories, relationship];
  if (shape.tokens) {
    steps.push(
      tokenUsageStep({
        organizationId: ORGANIZATION,
        endUserId: END_USER,
        personalityId: PERSONALITY,
        apiKeyId: null,
        at: AT,
        model: 'model-a',
        promptTokens: 1,
        completionTokens: 1,
        cachedTokens: 0,
      }),
    );
  }
  if (shape.reserved) {
    steps.push(
      reservationReleaseStep({
        organizationId: ORGANIZATION,
        budgets: ['organization'],
        reservationId: '00000000-0000-4000-8000-000000000004',
      }),
    );
  }
  if (shape.flagged) {
    const caller: CallerContext = {
      kind: 'user',
      userId: END_USER,
      organizationId: ORGANIZATION,
      scopes: [],
    };
    steps.push(
      ...flaggedExchangeSteps(memories, {
        caller,
        userId: 'end-user-1',
        personalityId: PERSONALITY,
        role: 'user',
        safety: { flagged: true, categories: ['self_harm'], action: 'flagged' },
        at: AT,
      }),
    );
  }
  if (shape.facts) {
    const facts = Array.from({ length: shape.facts }, (_, i) => ({
      content: `fact ${i}`,
      key: `fact ${i}`,
    }));
    steps.push(
      learnedFactsStep(memories, {
        organizationId: ORGANIZATION,
        endUserId: END_USER,
        facts,
        room: 10,
        at: AT,
      }),
    );
  }
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
export function replyStatements(): Array<[string, string]> {
  return REPLY_SHAPES.map(([title, shape]) => [title, replyStatement(shape)]);
}

const QUESTION = 'When do you open on Sundays?';
const MEANING: Meaning = {
  model: 'example',
  vector: [0.6, 0.8],
  candidates: 500,
  minSimilarity: 0,
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

/** One statement's text, its blank lines and trailing spaces gone, so the files diff cleanly. */
function formatted(text: string): string {
  return text
    .split('\n')
    .map((line) => line.trimEnd())
    .filter((line) => line.trim() !== '')
    .join('\n');
}

/** Every checked-in file's content, by file name. */
export function renderQueries(): Map<string, string> {
  const reply = replyStatements().map(
    ([title, text]) => `-- RespondRepository.storeExchange: ${title}\n${formatted(text)};\n`,
  );
  const knowledge = knowledgeStatements().map(
    ([title, text]) => `-- rankedChunks: ${title}\n${formatted(text)};\n`,
  );
  return new Map([
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
  for (const [file, content] of renderQueries()) writeFileSync(join(QUERIES_DIR, file), content);
}
