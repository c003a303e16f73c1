import { Client } from 'pg';
import {
  FAKE_MIN_SIMILARITY,
  FakeEmbeddings,
  fakeEmbedding,
} from '../../test/support/fake-embeddings';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { type RunningService, startService } from '../lib/service';
import { personalityReply, pick, random, userMessage, userSentence } from './support/chat-text';
import { benchTenant } from './support/data-plane';
import { MEMORY_RECALL_EN } from '../../test/fixtures/recall/memory-en';
import {
  KNOWLEDGE_DOCUMENTS_EN,
  KNOWLEDGE_QUESTIONS_EN,
} from '../../test/fixtures/recall/knowledge-en';
import { bm25Ranking, type RecallPool, serviceRanking } from './support/recall-rankings';
import { SENTENCE_ENCODER_MODEL, sentenceEncoder } from './support/sentence-encoder';
import { loadAverages, round3, timings } from './support/stats';

const EXCHANGES = 1_000; // 2,000 messages: each exchange is the user's message and the reply
const MIN_GAP = 30; // exchanges between a statement and its question: 60 messages, past the history
const RECALL_LIMIT = 8; // MEMORY_RECALL_LIMIT's default, which the service runs with
const HISTORY = 20; // ENGINE_HISTORY_MESSAGES's default
const USER_ID = 'recall-bench-user';
const SEED = 20_260_520;
const KNOWLEDGE_AT = 4; // KNOWLEDGE_CHUNK_LIMIT's default: the chunks a reply is given

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

type Turn =
  | { kind: 'filler'; message: string }
  | { kind: 'statement'; fact: number; message: string }
  | { kind: 'question'; fact: number; message: string };

/**
 * The conversation: 1,000 exchanges of filler chat, of which 30 user messages state a fact (the
 * statement alone, or with a chat sentence before or after it) at random points, and 30 later
 * ones ask its question, at least MIN_GAP exchanges after the statement.
 */
function conversation(next: () => number): Turn[] {
  const turns: Turn[] = Array.from({ length: EXCHANGES }, () => ({
    kind: 'filler',
    message: userMessage(next),
  }));
  const taken = new Set<number>();
  const free = (from: number, to: number) => {
    for (;;) {
      const at = from + Math.floor(next() * (to - from));
      if (!taken.has(at)) {
        taken.add(at);
        return at;
      }
    }
  };
  MEMORY_RECALL_EN.forEach(({ statement, question }, fact) => {
    const stated = free(5, EXCHANGES - MIN_GAP - 60);
    const asked = free(stated + MIN_GAP, EXCHANGES);
    const wrap = next();
    const message =
      wrap < 0.5
        ? statement
        : wrap < 0.75
          ? `${userSentence(next)} ${statement}`
          : `${statement} ${userSentence(next)}`;
    turns[stated] = { kind: 'statement', fact, message };
    turns[asked] = { kind: 'question', fact, message: question };
  });
  return turns;
}

/** The recalled memories of a system message, as the openai engine sent it (docs/memory.md). */
function recalledIn(system: string): Array<{ role: string; content: string }> {
  const header = '<recalled_memories>\n';
  const at = system.indexOf(header);
  if (at === -1) return [];
  const lines: Array<{ role: string; content: string }> = [];
  for (const line of system.slice(at + header.length).split('\n')) {
    // Each item's text is a JSON string (contract §29: user text is data).
    const match = /^- \d{4}-\d{2}-\d{2}, (the user|you): (".*")$/.exec(line);
    if (!match) break;
    lines.push({
      role: match[1] === 'the user' ? 'user' : 'personality',
      content: JSON.parse(match[2]) as string,
    });
  }
  return lines;
}

/**
 * After the conversation, each question's recall is ranked again over the memories it could
 * recall when it was asked (ids below the oldest of its history of 20): by the service's own
 * ranking, which must give the same 8 memories as the reply did (a check of this method: the
 * table's statistics may have moved since), and by full Okapi BM25 over every memory of the pool,
 * a reference the service's bounded ranking is compared with. Not the service's figures.
 */
async function rankingsOffline(
  db: Client,
  organizationId: string,
  personalityId: string,
  results: Json[],
  recalledContents: Map<number, string[]>,
) {
  const endUserId = (
    await db.query<{ id: string }>('SELECT id FROM end_users WHERE user_id = $1', [USER_ID])
  ).rows[0].id;
  const rankings = { service: serviceRanking, bm25: bm25Ranking };
  const hits = { service: 0, bm25: 0 };
  const missed: Record<keyof typeof rankings, string[]> = { service: [], bm25: [] };
  let sameAsReply = 0;
  for (const result of results) {
    const newest = result.newest_memory_before as string;
    const bound = (
      await db.query<{ id: string }>(
        `SELECT min(id)::text AS id FROM (SELECT id FROM memories WHERE end_user_id = $1
            AND personality_id = $2 AND id <= $3 ORDER BY id DESC LIMIT $4) h`,
        [endUserId, personalityId, newest, HISTORY],
      )
    ).rows[0].id;
    const statementId = (
      await db.query<{ id: string }>(
        `SELECT id::text FROM memories WHERE end_user_id = $1 AND role = 'user' AND content = $2
            AND id < $3 ORDER BY id DESC LIMIT 1`,
        [endUserId, result.statement, bound],
      )
    ).rows[0]?.id;
    const pool: RecallPool = {
      organizationId,
      endUserId,
      personalityId,
      bound,
      message: result.question as string,
      limit: RECALL_LIMIT,
    };
    for (const [name, rank] of Object.entries(rankings) as Array<
      [keyof typeof rankings, (db: Client, pool: RecallPool) => Promise<string[]>]
    >) {
      const top = await rank(db, pool);
      if (statementId && top.includes(statementId)) hits[name]++;
      else missed[name].push(result.question as string);
      if (name === 'service') {
        const contents = (
          await db.query<{ content: string }>(
            'SELECT content FROM memories WHERE id = ANY($1::bigint[]) ORDER BY array_position($1::bigint[], id)',
            [top],
          )
        ).rows.map((row) => row.content);
        const inReply = recalledContents.get(result.fact as number) ?? [];
        if (JSON.stringify(contents) === JSON.stringify(inReply)) sameAsReply++;
      }
    }
  }
  return {
    note: "not the service's figures: the same 30 questions, over the same memories each could recall when asked, ranked by the service's SQL and by full Okapi BM25 over every memory as a reference (support/recall-rankings.ts)",
    service_replayed_same_8_as_the_reply: `${sameAsReply} of ${results.length}`,
    service: { hits: hits.service, missed: missed.service },
    full_okapi_bm25_over_every_memory: { hits: hits.bm25, missed: missed.bm25 },
  };
}

/** How varied the generated conversation's words are, as the index sees them. */
async function vocabulary(db: Client) {
  const { rows } = await db.query<{ word: string; ndoc: number }>(
    `SELECT word, ndoc FROM ts_stat('SELECT search FROM memories') ORDER BY ndoc DESC, word`,
  );
  const total = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM memories')).rows[0]
    .n;
  return {
    distinct_lexemes: rows.length,
    lexemes_in_over_10_percent_of_memories: rows.filter((r) => r.ndoc > total / 10).length,
    most_frequent: rows.slice(0, 15).map((r) => `${r.word} ${r.ndoc}`),
    caveat:
      'template-generated chat has a smaller vocabulary than real conversations: its common words are more common, so ties on them are more frequent than in real chat',
  };
}

/**
 * Recall quality (issue 20): a generated conversation of 2,000 messages with 30 facts stated at
 * random points and 30 later questions worded differently that share at least one content word
 * with their statement. Every message goes through the real service, `POST /v1/respond` with
 * RESPONSE_ENGINE=openai against the fake provider in this process (which answers each message
 * with a generated reply), so every memory and its tsvector are the service's own. For each
 * question, the recalled memories are read from the system message the service sent the
 * provider: exactly what a reply recalls (MEMORY_RECALL_LIMIT 8 older memories, history 20).
 * Goal: the statement among them for >= 27 of 30.
 */
/**
 * Seconds until the worker of a hybrid instance has passed every row of `table` (its source's
 * cursor, of `model` if given: a model's worker embeds again what another embedded) and embedded
 * what it queued (embedding_queue empty for it), each but a memory that only asks, which is never
 * sent (src/embeddings/only-asks.ts). The cursor alone says only that a row was queued.
 */
async function untilEmbedded(
  db: Client,
  table: 'memories' | 'knowledge_chunks',
  { model, timeoutMs }: { model?: string; timeoutMs: number },
): Promise<number> {
  const started = performance.now();
  for (;;) {
    const { rows } = await db.query<{ passed: boolean }>(
      `SELECT coalesce(bool_or(c.position >= (SELECT coalesce(max(id), 0) FROM ${table})), false)
              AND NOT EXISTS (SELECT FROM embedding_queue q
                               WHERE q.source = $1 AND ($2::text IS NULL OR q.model = $2)) AS passed
         FROM embedding_cursors c
        WHERE c.source = $1 AND ($2::text IS NULL OR c.model = $2)`,
      [table, model ?? null],
    );
    if (rows[0].passed) return (performance.now() - started) / 1000;
    if (performance.now() - started > timeoutMs) throw new Error(`${table} not embedded`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Knowledge recall@4: the tea shop's four documents and ten of generated chat uploaded, every
 * chunk embedded, then each question of test/fixtures/recall/knowledge-en.ts searched on both
 * instances (GET /v1/knowledge/search, limit 4): found when a chunk holds the question's passage.
 */
async function knowledgeRecall(
  lexical: RunningService,
  hybrid: RunningService,
  headers: Record<string, string>,
  db: Client,
) {
  for (const { title, content } of KNOWLEDGE_DOCUMENTS_EN) {
    await post(lexical, headers, '/v1/knowledge', { title, content });
  }
  const next = random(SEED + 1);
  for (let i = 0; i < 10; i++) {
    const content = Array.from({ length: 40 }, () => userSentence(next)).join(' ');
    await post(lexical, headers, '/v1/knowledge', { title: `Notes ${i}`, content });
  }
  const embeddedIn = await untilEmbedded(db, 'knowledge_chunks', {
    timeoutMs: 60_000,
  });
  const modes = {
    lexical: await knowledgeAnswers(lexical, headers),
    hybrid: await knowledgeAnswers(hybrid, headers),
  };
  const hybridHits = modes.hybrid.shared + modes.hybrid.paraphrase;
  return {
    method: `GET /v1/knowledge/search?limit=${KNOWLEDGE_AT} for the ${all} questions of test/fixtures/recall/knowledge-en.ts (a tea shop's four documents, ${of('shared')} questions sharing a content word with their passage, ${of('paraphrase')} sharing none), among ten more documents of generated chat; lexical on the first instance, hybrid on one with EMBEDDINGS_MIN_SIMILARITY ${FAKE_MIN_SIMILARITY} (the fake's floor) once every chunk was embedded`,
    chunks_embedded_in_seconds: Number(embeddedIn.toFixed(1)),
    lexical: {
      shared_word: { hits: modes.lexical.shared, of: of('shared') },
      paraphrase: { hits: modes.lexical.paraphrase, of: of('paraphrase') },
      missed: modes.lexical.missed,
    },
    hybrid: {
      shared_word: { hits: modes.hybrid.shared, of: of('shared') },
      paraphrase: { hits: modes.hybrid.paraphrase, of: of('paraphrase') },
      missed: modes.hybrid.missed,
    },
    recall_at_4_hybrid: round3(hybridHits / all),
    goal: '>= 0.9 of the questions (hybrid)',
    goal_met: hybridHits >= 0.9 * all,
  };
}

const of = (kind: 'shared' | 'paraphrase') =>
  KNOWLEDGE_QUESTIONS_EN.filter((q) => q.kind === kind).length;
const all = KNOWLEDGE_QUESTIONS_EN.length;

/** Each knowledge question asked of `instance` (limit 4): found when a chunk holds its passage. */
async function knowledgeAnswers(instance: RunningService, headers: Record<string, string>) {
  const figures = { shared: 0, paraphrase: 0, missed: [] as string[] };
  for (const { question, passage, kind } of KNOWLEDGE_QUESTIONS_EN) {
    const url = new URL(`${instance.baseUrl}/v1/knowledge/search`);
    url.searchParams.set('q', question);
    url.searchParams.set('limit', String(KNOWLEDGE_AT));
    const response = await fetch(url, { headers });
    if (response.status !== 200) throw new Error(`knowledge search: ${response.status}`);
    const hits = ((await response.json()) as Json).data as Array<{ text: string }>;
    if (hits.some((hit) => hit.text.includes(passage))) figures[kind]++;
    else figures.missed.push(question);
  }
  return figures;
}

/** The index of the fact that `paraphrase` asks about (test/fixtures/recall/memory-en.ts). */
function factOfParaphrase(paraphrase: string): number {
  return MEMORY_RECALL_EN.findIndex((item) => item.paraphrase === paraphrase);
}

/**
 * The statement's rank (1 = nearest) by exact cosine with `question` (`vector`, the embedder's)
 * among every embedded memory of the bench's end user, its cosine, and the (at most three)
 * memories the embedder puts first.
 */
async function rankByCosine(db: Client, vector: number[], question: string, statement: string) {
  const norm = Math.hypot(...vector);
  const { rows } = await db.query<{ content: string; cosine: number }>(
    `SELECT m.content,
            (SELECT sum(a * b) FROM unnest(e.embedding, $1::real[]) AS v(a, b))::float8 AS cosine
       FROM memory_embeddings e
       JOIN memories m ON m.id = e.memory_id
       JOIN end_users u ON u.id = e.end_user_id
      WHERE u.user_id = $2
      ORDER BY cosine DESC, e.memory_id DESC`,
    [vector.map((x) => x / norm), USER_ID],
  );
  const index = rows.findIndex((row) => row.content === statement);
  return {
    question,
    statement,
    statement_rank: index === -1 ? null : index + 1,
    statement_cosine: index === -1 ? null : round3(rows[index].cosine),
    nearest: rows.slice(0, 3).map((row) => ({
      content: row.content.slice(0, 90),
      cosine: round3(row.cosine),
    })),
  };
}

async function post(
  instance: RunningService,
  headers: Record<string, string>,
  path: string,
  body: unknown,
) {
  const response = await fetch(`${instance.baseUrl}${path}`, {
    method: 'POST',
    headers,
    body: JSON.stringify(body),
  });
  if (response.status >= 300) throw new Error(`${path}: ${response.status}`);
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const fake = await FakeOpenAI.start();
  const service = await startService({
    env: {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'bench-key',
      OPENAI_MODEL: 'gpt-bench',
      ENGINE_TIMEOUT_MS: '30000',
    },
  });
  const db = new Client({ connectionString: service.databaseUrl });
  await db.connect();
  const fakeEmbeddings = new FakeEmbeddings();
  let embeddings: FakeEmbeddings | undefined;
  let realModel: FakeEmbeddings | undefined;
  let hybrid: RunningService | undefined;
  try {
    const tenant = await benchTenant(service.baseUrl);
    const next = random(SEED);
    const turns = conversation(next);
    const emotions = ['caring', 'curiosity', 'joy', 'neutral', 'optimism', 'approval'];
    fake.respondAlwaysWith(() => ({
      content: {
        text: personalityReply(next),
        emotion: pick(next, emotions),
        intensity: 0.5,
        facts: [],
      },
    }));
    const headers = { 'content-type': 'application/json', authorization: tenant.auth };
    const search = async (q: string, limit: number): Promise<Json[]> => {
      const url = new URL(`${service.baseUrl}/v1/end-users/${USER_ID}/memories/search`);
      url.searchParams.set('q', q);
      url.searchParams.set('personality_id', tenant.personalityId);
      url.searchParams.set('limit', String(limit));
      const response = await fetch(url, { headers });
      if (response.status !== 200) throw new Error(`search: ${response.status}`);
      return ((await response.json()) as Json).data as Json[];
    };
    const lexemes = async (text: string): Promise<string[]> =>
      (
        await db.query<{ l: string[] }>(
          `SELECT tsvector_to_array(to_tsvector('english', $1)) AS l`,
          [text],
        )
      ).rows[0].l;

    const statements = new Map<number, { message: string; exchange: number }>();
    const results: Json[] = [];
    const recalledContents = new Map<number, string[]>();
    const replyMs: number[] = [];
    const startedAt = performance.now();
    for (let exchange = 0; exchange < turns.length; exchange++) {
      const turn = turns[exchange];
      let before: Json[] | undefined;
      let newestBefore = '0';
      if (turn.kind === 'question') {
        before = await search(turn.message, 50);
        newestBefore = (await db.query<{ id: string }>('SELECT max(id)::text AS id FROM memories'))
          .rows[0].id;
      }
      const sentAt = performance.now();
      const response = await fetch(`${service.baseUrl}/v1/respond`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          personality_id: tenant.personalityId,
          user_id: USER_ID,
          message: turn.message,
        }),
      });
      if (response.status !== 200) {
        throw new Error(`respond ${exchange}: ${response.status} ${await response.text()}`);
      }
      await response.json();
      replyMs.push(performance.now() - sentAt);
      if (turn.kind === 'statement') statements.set(turn.fact, { message: turn.message, exchange });
      if (turn.kind !== 'question') continue;

      const stated = statements.get(turn.fact)!;
      const sent = fake.lastRequest().body!.messages!;
      const recalled = recalledIn(sent[0].content as string);
      recalledContents.set(
        turn.fact,
        recalled.map((m) => m.content),
      );
      const inHistory = sent.slice(1, -1).some((m) => m.content === stated.message);
      const position = recalled.findIndex((m) => m.role === 'user' && m.content === stated.message);
      const searchRank = before!.findIndex((m) => m.content === stated.message);
      const statementLexemes = await lexemes(stated.message);
      const questionLexemes = await lexemes(turn.message);
      results.push({
        fact: turn.fact,
        newest_memory_before: newestBefore,
        statement: stated.message,
        question: turn.message,
        stated_at_exchange: stated.exchange,
        asked_at_exchange: exchange,
        shared_lexemes: questionLexemes.filter((l) => statementLexemes.includes(l)),
        question_lexemes: questionLexemes,
        recalled: position !== -1,
        position_in_recall: position === -1 ? null : position + 1,
        statement_in_history: inHistory,
        search_rank_before_asking: searchRank === -1 ? '> 50' : searchRank + 1,
        statement_score: before!.find((m) => m.content === stated.message)?.score ?? null,
        recalled_memories: recalled.length,
        // For a miss, what was recalled instead.
        recalled_instead:
          position === -1 ? recalled.map((m) => `${m.role}: ${m.content.slice(0, 90)}`) : undefined,
      });
    }
    const conversationSeconds = (performance.now() - startedAt) / 1000;

    // The same questions once the conversation is over, through the search endpoint (limit 8):
    // every memory competes, the question asked in the conversation (and its reply) included.
    const atEnd: Json[] = [];
    for (const { question } of MEMORY_RECALL_EN) {
      const found = await search(question, 50);
      const fact = results.find((r) => r.question === question)!;
      const rank = found.findIndex((m) => m.content === fact.statement);
      atEnd.push({
        question,
        rank: rank === -1 ? '> 50' : rank + 1,
        in_top_8: rank !== -1 && rank < 8,
      });
    }

    // Recall by meaning: each question and its paraphrase (sharing no content word with the
    // statement) through the search endpoint, top 8, lexical (this instance, no EMBEDDINGS_MODEL)
    // and hybrid (a second instance on the same database whose worker embeds every memory with
    // test/support/fake-embeddings.ts's concept embedder).
    const topEight = async (searchWith: typeof search) => {
      const figures = { shared: 0, paraphrase: 0, missed_paraphrases: [] as string[] };
      for (const [fact, { question, paraphrase }] of MEMORY_RECALL_EN.entries()) {
        // The message that stated the fact: the statement, alone or with a chat sentence.
        const stated = statements.get(fact)!.message;
        if ((await searchWith(question, 8)).some((m) => m.content === stated)) figures.shared++;
        if ((await searchWith(paraphrase, 8)).some((m) => m.content === stated)) {
          figures.paraphrase++;
        } else figures.missed_paraphrases.push(paraphrase);
      }
      return figures;
    };
    const lexicalFigures = await topEight(search);
    await fakeEmbeddings.start();
    embeddings = fakeEmbeddings;
    const hybridEnv = {
      EMBEDDINGS_MODEL: 'fake-embed',
      EMBEDDINGS_BASE_URL: fakeEmbeddings.url,
      EMBEDDINGS_API_KEY: 'bench-key',
      EMBEDDINGS_DIMENSIONS: '256',
      EMBEDDINGS_BATCH_SIZE: '128',
    };
    hybrid = await startService({
      databaseUrl: service.databaseUrl,
      env: hybridEnv,
    });
    const embedSeconds = await untilEmbedded(db, 'memories', {
      timeoutMs: 120_000,
    });
    const searchOn = (instance: RunningService) => async (q: string, limit: number) => {
      const url = new URL(`${instance.baseUrl}/v1/end-users/${USER_ID}/memories/search`);
      url.searchParams.set('q', q);
      url.searchParams.set('personality_id', tenant.personalityId);
      url.searchParams.set('limit', String(limit));
      const response = await fetch(url, { headers });
      if (response.status !== 200) throw new Error(`search: ${response.status}`);
      return ((await response.json()) as Json).data as Json[];
    };
    const hybridFigures = await topEight(searchOn(hybrid));
    // Where the embedder alone puts each missed paraphrase's statement: its rank by exact cosine
    // among every embedded memory of the end user (no sketch, no floor, no fusion), and the
    // memories it puts first. A statement ranked within the search's depth but missed is lost in
    // the fusion; one ranked below it, by the embedder.
    // One at a time: a pg Client runs one query at a time (pg 9 refuses a second).
    const byMeaning = [];
    for (const paraphrase of hybridFigures.missed_paraphrases) {
      const statement = statements.get(factOfParaphrase(paraphrase))!.message;
      byMeaning.push(await rankByCosine(db, fakeEmbedding(paraphrase), paraphrase, statement));
    }
    // Knowledge at the fake's own floor (FAKE_MIN_SIMILARITY says why it is below the default):
    // an instance of its own, so the memory figures stay at the default.
    const hybridKnowledge = await startService({
      databaseUrl: service.databaseUrl,
      env: { ...hybridEnv, EMBEDDINGS_MIN_SIMILARITY: String(FAKE_MIN_SIMILARITY) },
    });
    const knowledge = await knowledgeRecall(service, hybridKnowledge, headers, db).finally(() =>
      hybridKnowledge.stop(),
    );
    await hybrid.stop();
    // The same with the latest 500 compared (EMBEDDINGS_CANDIDATES 500, the bound before sign
    // sketches made comparing cheap): what a bound short of the conversation costs a statement
    // stated long before.
    hybrid = await startService({
      databaseUrl: service.databaseUrl,
      env: { ...hybridEnv, EMBEDDINGS_CANDIDATES: '500' },
    });
    const latestFiveHundredFigures = await topEight(searchOn(hybrid));
    await hybrid.stop();
    hybrid = undefined;

    // A real model (support/sentence-encoder.ts) at the service's defaults, on an instance of its
    // own: a new EMBEDDINGS_MODEL, so its worker embeds every memory and chunk again (vectors of
    // another model are never compared); then the same memory and knowledge questions.
    const embed = await sentenceEncoder();
    realModel = new FakeEmbeddings(embed);
    await realModel.start();
    hybrid = await startService({
      databaseUrl: service.databaseUrl,
      env: {
        EMBEDDINGS_MODEL: SENTENCE_ENCODER_MODEL,
        EMBEDDINGS_BASE_URL: realModel.url,
        EMBEDDINGS_API_KEY: 'bench-key',
        EMBEDDINGS_BATCH_SIZE: '64',
      },
    });
    const realModelSeconds = await untilEmbedded(db, 'memories', {
      model: SENTENCE_ENCODER_MODEL,
      timeoutMs: 1_800_000,
    });
    await untilEmbedded(db, 'knowledge_chunks', {
      model: SENTENCE_ENCODER_MODEL,
      timeoutMs: 600_000,
    });
    const realModelFigures = await topEight(searchOn(hybrid));
    const realModelByMeaning = [];
    for (const paraphrase of realModelFigures.missed_paraphrases) {
      const [vector] = await embed([paraphrase]);
      const statement = statements.get(factOfParaphrase(paraphrase))!.message;
      realModelByMeaning.push(await rankByCosine(db, vector, paraphrase, statement));
    }
    const realModelKnowledge = await knowledgeAnswers(hybrid, headers);

    const replayed = await rankingsOffline(
      db,
      tenant.organizationId,
      tenant.personalityId,
      results,
      recalledContents,
    );

    const memories = await db.query<{ n: number; user: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE role = 'user')::int AS user FROM memories`,
    );
    const hits = results.filter((r) => r.recalled).length;
    const searchHits = results.filter(
      (r) => typeof r.search_rank_before_asking === 'number' && r.search_rank_before_asking <= 8,
    ).length;
    return {
      load_average_at_start: loadAtStart,
      load_average_at_end: loadAverages(),
      method: {
        conversation: `${EXCHANGES} exchanges (${EXCHANGES * 2} messages) of generated everyday chat (bench/scenarios/support/chat-text.ts, seed ${SEED}): 30 user messages state a fact at random points, 30 later ones (>= ${MIN_GAP} exchanges after) ask about it; questions written before the first run (test/fixtures/recall/memory-en.ts)`,
        written_through:
          'POST /v1/respond, RESPONSE_ENGINE=openai against test/support/fake-openai.ts, which answers each message with a generated reply (no facts learned): every memory and tsvector is written by the service (memoriesInsertStep, english)',
        recall_read_from:
          "the system message the service sent the provider for the question (the lines of its recalled_memories block): the reply's own recall, MEMORY_RECALL_LIMIT 8, history 20",
        search_rank:
          'GET /v1/end-users/{id}/memories/search?q=<question>&personality_id=&limit=50 just before the question is sent: the same ranking over every memory (the history included)',
      },
      memories: memories.rows[0].n,
      user_messages: memories.rows[0].user,
      recall_limit: RECALL_LIMIT,
      history_messages: HISTORY,
      recall_at_8: {
        hits,
        of: results.length,
        share: round3(hits / results.length),
        goal: '>= 27 of 30 (0.9)',
        goal_met: hits >= 27,
        missed: results
          .filter((r) => !r.recalled)
          .map((r) => ({ question: r.question, statement: r.statement })),
      },
      search_endpoint_top_8_before_asking: { hits: searchHits, of: results.length },
      asked_again_at_end_search_top_8: {
        hits: atEnd.filter((r) => r.in_top_8).length,
        of: atEnd.length,
        per_question: atEnd,
      },
      search_top_8_lexical_and_hybrid: {
        method: `GET /v1/end-users/{id}/memories/search?limit=8 once the conversation is over, for the 30 questions sharing a word and their 30 paraphrases sharing none (test/fixtures/recall/memory-en.ts): lexical on this instance, hybrid (RRF of full text and embeddings) on a second instance whose worker embedded every memory with the fake concept embedder (test/support/fake-embeddings.ts, 256 dimensions, the default EMBEDDINGS_MIN_SIMILARITY)`,
        embedding_seconds: Number(embedSeconds.toFixed(1)),
        shared_word_lexical: { hits: lexicalFigures.shared, of: 30, goal: '>= 27' },
        shared_word_hybrid: { hits: hybridFigures.shared, of: 30 },
        paraphrase_lexical: { hits: lexicalFigures.paraphrase, of: 30 },
        paraphrase_hybrid: {
          hits: hybridFigures.paraphrase,
          of: 30,
          goal: '>= 0.9 (27)',
          goal_met: hybridFigures.paraphrase >= 27,
          missed: hybridFigures.missed_paraphrases,
        },
        missed_paraphrases_by_exact_cosine: {
          method: `each missed paraphrase's statement ranked by its exact cosine with the paraphrase (the fake's vector) among all ${memories.rows[0].n} embedded memories: the ranking the embedder gives before the search's depth (twice the limit), floor and fusion`,
          search_depth: 2 * 8,
          per_question: byMeaning,
        },
        embeddings_candidates:
          'EMBEDDINGS_CANDIDATES 5000 (the default): the sketches of every memory of this conversation compared, the nearest 116 by Hamming distance estimated again by the whole question, the best 56 compared whole; below, 500: the latest 500 only (the default before sketches)',
        latest_500_compared: {
          shared_word_hybrid: { hits: latestFiveHundredFigures.shared, of: 30 },
          paraphrase_hybrid: {
            hits: latestFiveHundredFigures.paraphrase,
            of: 30,
            missed: latestFiveHundredFigures.missed_paraphrases,
          },
        },
      },
      real_model: {
        method: `the same questions once a real embedding model had embedded every memory and chunk: the Universal Sentence Encoder (lite, English, 512 dimensions; bench/scenarios/support/sentence-encoder.ts) behind the same OpenAI-compatible endpoint, on an instance at the service's defaults (EMBEDDINGS_MIN_SIMILARITY 0.3, EMBEDDINGS_CANDIDATES 5000); memories: search top 8, hybrid; knowledge: search top ${KNOWLEDGE_AT}, hybrid`,
        embedding_seconds: Number(realModelSeconds.toFixed(1)),
        memories: {
          shared_word_hybrid: { hits: realModelFigures.shared, of: 30 },
          paraphrase_hybrid: {
            hits: realModelFigures.paraphrase,
            of: 30,
            goal: '>= 0.9 (27)',
            goal_met: realModelFigures.paraphrase >= 27,
            missed: realModelFigures.missed_paraphrases,
          },
          missed_paraphrases_by_exact_cosine: realModelByMeaning,
        },
        knowledge: {
          shared_word: { hits: realModelKnowledge.shared, of: of('shared') },
          paraphrase: { hits: realModelKnowledge.paraphrase, of: of('paraphrase') },
          missed: realModelKnowledge.missed,
          recall_at_4: round3((realModelKnowledge.shared + realModelKnowledge.paraphrase) / all),
        },
      },
      knowledge_recall_at_4: knowledge,
      rankings_replayed_offline: replayed,
      vocabulary: await vocabulary(db),
      conversation_seconds: Number(conversationSeconds.toFixed(1)),
      respond_latency: timings(replyMs),
      per_question: results,
    };
  } finally {
    await hybrid?.stop();
    await embeddings?.stop();
    await realModel?.stop();
    await db.end();
    await service.stop();
    await fake.close();
  }
}
