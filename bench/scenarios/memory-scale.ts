import { Client } from 'pg';
import type { Database } from '../../src/database/database';
import type { Sql } from '../../src/database/sql';
import { statementName } from '../../src/database/statement-name';
import { ConversationRepository } from '../../src/memory/conversation.repository';
import { extractFacts } from '../../src/respond/engine/fact-extractor';
import { cpuSeconds } from '../lib/cpu';
import { load, type LoadFigures } from '../lib/load';
import { type RunningService, startService } from '../lib/service';
import { random, userMessage, userSentence } from './support/chat-text';
import { backendCpu, cpuBetween } from './support/db-cpu';
import { benchTenant } from './support/data-plane';
import { MEMORY_RECALL_EN } from '../../test/fixtures/recall/memory-en';
import { type ScaleUser, seedMemories } from './support/scale-seed';
import { load1, loadAverages, median, percentile, round2, round3, timings } from './support/stats';

const TOTAL_MEMORIES = 1_000_000;
const HEAVY_MEMORIES = 20_000;
const ORDINARY_USERS = 998;
const HEAVY = 'scale-heavy'; // 20,000 memories with one personality, 50 facts
const TWIN = 'scale-heavy-twin'; // the same, without facts: the end user of the "off" runs
// 20,000 memories that are all one sentence, long-history's: every memory holds every word of
// the message when that sentence is sent again (the worst case for ranking by shared words).
const SAME = 'scale-same-sentence';
const SAME_SENTENCE = 'I took my dog Rex to the park again today and he loved it, I love that dog.';
const FACTS = 50;
const MESSAGES = Number(process.env.BENCH_MESSAGES ?? 1_000);
const SEARCHES = Number(process.env.BENCH_SEARCHES ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SEED = 20_260_601;
const HISTORY = 20;
const RECALL = 8;

/** The name the service's Database prepares a statement under (none when it is not prepared). */
const preparedName = (statement: Sql, options: { prepared?: boolean } = {}) =>
  options.prepared ? statementName(statement.text) : undefined;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

async function api(service: RunningService, auth: string, path: string, body: unknown) {
  const response = await fetch(`${service.baseUrl}${path}`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: auth },
    body: JSON.stringify(body),
  });
  if (response.status >= 300)
    throw new Error(`${path}: ${response.status} ${await response.text()}`);
  return (await response.json()) as Json;
}

/**
 * The statement findConversation sends for a message (its text, values and prepared name), from
 * the repository itself through a Database that only records it: the bench runs the very SQL a
 * reply runs.
 */
async function conversationStatement(
  organizationId: string,
  userId: string,
  personalityId: string,
  message: string,
  recall: number,
): Promise<{ text: string; values: unknown[]; name: string | undefined }> {
  let captured: { statement: Sql; name: string | undefined } | undefined;
  const recorder = {
    row: (statement: Sql, options: { prepared?: boolean }) => {
      captured = { statement, name: preparedName(statement, options) };
      return Promise.resolve(undefined);
    },
    rowsWithin: (statement: Sql, _timeoutMs: number, options: { prepared?: boolean }) => {
      captured = { statement, name: preparedName(statement, options) };
      return Promise.resolve([]);
    },
  } as unknown as Database;
  const repository = new ConversationRepository(recorder);
  // Recall off: the conversation read alone; on: the conversation read with recall, one
  // statement (embeddings off, as here).
  if (recall === 0) {
    await repository.findConversation(organizationId, userId, personalityId, HISTORY);
  } else {
    await repository.findConversationRecalling(
      organizationId,
      userId,
      personalityId,
      message,
      { history: HISTORY, recall },
      0,
    );
  }
  return {
    text: captured!.statement.text,
    values: [...captured!.statement.values],
    name: captured!.name,
  };
}

const literal = (value: unknown) =>
  typeof value === 'number' ? String(value) : `'${String(value).replace(/'/g, "''")}'`;

/** The text with its `$n` replaced by literals, highest first ($12 before $1). */
function inlined(statement: { text: string; values: unknown[] }): string {
  let text = statement.text;
  for (let n = statement.values.length; n >= 1; n--) {
    text = text.split(`$${n}`).join(literal(statement.values[n - 1]));
  }
  return text;
}

/**
 * (a) The recall read: findConversation's statement, prepared under the service's name on one
 * connection (so PostgreSQL's plan cache treats it as the service's pool does), run for each
 * message, timed from this process (the round trip included, as the service waits for it).
 */
async function recallQuery(
  databaseUrl: string,
  organizationId: string,
  personalityId: string,
  ordinaryUser: string,
  messages: string[],
) {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    // The statements' names (derived from their text, as the service prepares them).
    const names: { on?: string; off?: string } = {};
    const run = async (userId: string, message: string, recall: number) => {
      const statement = await conversationStatement(
        organizationId,
        userId,
        personalityId,
        message,
        recall,
      );
      names[recall === 0 ? 'off' : 'on'] = statement.name;
      const startedAt = performance.now();
      const { rows } = await db.query<Json>(statement);
      const ms = performance.now() - startedAt;
      return { ms, recalled: recall === 0 ? 0 : rows.length };
    };
    for (const message of messages.slice(0, 50)) {
      await run(HEAVY, message, RECALL);
      await run(HEAVY, message, 0);
      await run(ordinaryUser, message, RECALL);
      await run(SAME, SAME_SENTENCE, RECALL);
    }
    const loadBefore = load1();
    const heavyOn: number[] = [];
    const heavyOff: number[] = [];
    const ordinaryOn: number[] = [];
    const sameOn: number[] = [];
    let emptyRecall = 0;
    let sameRecalled = 0;
    for (const message of messages) {
      const on = await run(HEAVY, message, RECALL);
      heavyOn.push(on.ms);
      if (on.recalled === 0) emptyRecall++;
      heavyOff.push((await run(HEAVY, message, 0)).ms);
      ordinaryOn.push((await run(ordinaryUser, message, RECALL)).ms);
      const same = await run(SAME, SAME_SENTENCE, RECALL);
      sameOn.push(same.ms);
      sameRecalled = Math.max(sameRecalled, same.recalled);
    }
    const loadAfter = load1();
    const plans = await db.query<Json>(
      `SELECT name, generic_plans::int, custom_plans::int FROM pg_prepared_statements
        WHERE name = ANY($1) ORDER BY name`,
      [[names.on, names.off]],
    );

    return {
      method:
        "the conversation read's statement (captured from ConversationRepository: findConversation with recall off, findConversationRecalling with it on, the history, facts and recall in one statement; the message's lexemes computed in the statement as the service does), prepared under the service's name on one connection and run once per message, sequentially, timed in this process (round trip included); the four variants take turns message by message",
      messages: messages.length,
      heavy_user_recall_on: {
        ...timings(heavyOn),
        statement: names.on,
      },
      heavy_user_recall_off: { ...timings(heavyOff), statement: names.off },
      ordinary_user_recall_on: timings(ordinaryOn),
      same_sentence_user_recall_on: {
        ...timings(sameOn),
        user: `${SAME}: ${HEAVY_MEMORIES} memories, every one "${SAME_SENTENCE}", which is the message each time`,
        rows_recalled: sameRecalled,
      },
      heavy_user_messages_recalling_nothing: emptyRecall,
      plan_cache: plans.rows,
      load_average_1m: [loadBefore, loadAfter],
      goal: 'p99 <= 10 ms (heavy user and same-sentence user, recall on)',
      goal_met: percentile(heavyOn, 99) <= 10 && percentile(sameOn, 99) <= 10,
    };
  } finally {
    await db.end();
  }
}

/** EXPLAIN (ANALYZE, BUFFERS) of the recall statement: as a custom plan, and as prepared. */
async function explain(
  databaseUrl: string,
  organizationId: string,
  personalityId: string,
  userId: string,
  message: string,
) {
  const db = new Client({ connectionString: databaseUrl });
  await db.connect();
  try {
    const statement = await conversationStatement(
      organizationId,
      userId,
      personalityId,
      message,
      RECALL,
    );
    const lines = (rows: Json[]) => rows.map((row) => row['QUERY PLAN'] as string);
    await db.query(inlined(statement)); // warm
    const custom = lines(
      (await db.query<Json>(`EXPLAIN (ANALYZE, BUFFERS) ${inlined(statement)}`)).rows,
    );
    // As the pool runs it: a prepared statement, after the five custom plans that precede the
    // plan cache's choice of a generic one.
    await db.query(`PREPARE recall_explained AS ${statement.text}`);
    const execute = `EXECUTE recall_explained(${statement.values.map(literal).join(', ')})`;
    for (let i = 0; i < 6; i++) await db.query(execute);
    const prepared = lines((await db.query<Json>(`EXPLAIN (ANALYZE, BUFFERS) ${execute}`)).rows);
    const cache = await db.query<Json>(
      `SELECT generic_plans::int, custom_plans::int FROM pg_prepared_statements WHERE name = 'recall_explained'`,
    );
    await db.query('DEALLOCATE recall_explained');
    return {
      user_id: userId,
      message,
      custom_plan: custom,
      as_prepared: prepared,
      plan_cache: cache.rows[0],
    };
  } finally {
    await db.end();
  }
}

/** (b) GET /v1/end-users/{id}/memories/search, one request at a time. */
async function searchEndpoint(
  service: RunningService,
  auth: string,
  personalityId: string,
  byKind: Record<string, string[]>,
) {
  // The kinds take turns, so that no kind meets the machine's load alone.
  const queries: Array<{ kind: string; q: string }> = [];
  const longest = Math.max(...Object.values(byKind).map((list) => list.length));
  for (let i = 0; i < longest; i++) {
    for (const [kind, list] of Object.entries(byKind))
      if (i < list.length) queries.push({ kind, q: list[i] });
  }
  const once = async (q: string, withPersonality: boolean, userId = HEAVY) => {
    const url = new URL(`${service.baseUrl}/v1/end-users/${userId}/memories/search`);
    url.searchParams.set('q', q);
    if (withPersonality) url.searchParams.set('personality_id', personalityId);
    const startedAt = performance.now();
    const response = await fetch(url, { headers: { authorization: auth } });
    const body = (await response.json()) as Json;
    const ms = performance.now() - startedAt;
    if (response.status !== 200) throw new Error(`search: ${response.status}`);
    return { ms, found: (body.data as unknown[]).length };
  };
  for (const { q } of queries.slice(0, 30)) await once(q, true);
  const loadBefore = load1();
  const withPersonality: number[] = [];
  const withoutPersonality: number[] = [];
  const perKind: Record<string, number[]> = {};
  const slowest: Array<{ kind: string; q: string; ms: number }> = [];
  let empty = 0;
  for (const { kind, q } of queries) {
    const result = await once(q, true);
    withPersonality.push(result.ms);
    slowest.push({ kind, q, ms: round2(result.ms) });
    (perKind[kind] ??= []).push(result.ms);
    if (result.found === 0) empty++;
    withoutPersonality.push((await once(q, false)).ms);
  }
  // The worst case for ranking by shared words: every memory of the end user holds every word.
  const sameSentence: number[] = [];
  for (let i = 0; i < Math.min(200, queries.length); i++) {
    sameSentence.push((await once(SAME_SENTENCE, true, SAME)).ms);
  }
  return {
    method:
      'one request at a time from this process (keep-alive), limit 10 (the default); each query with personality_id, then without (every personality of the end user, the DISTINCT search_config branch)',
    queries: queries.length,
    query_kinds:
      'a third each: a sentence of generated chat; a question (the 30 of test/fixtures/recall/memory-en.ts, then generated ones); one or two words of a chat sentence',
    examples: Object.fromEntries(
      Object.entries(byKind).map(([kind, list]) => [kind, list.slice(0, 3)]),
    ),
    with_personality_id: timings(withPersonality),
    with_personality_id_by_kind: Object.fromEntries(
      Object.entries(perKind).map(([kind, values]) => [kind, timings(values)]),
    ),
    without_personality_id: timings(withoutPersonality),
    same_sentence_user: {
      ...timings(sameSentence),
      query: `${SAME}'s one sentence, with personality_id`,
    },
    queries_finding_nothing: empty,
    slowest_with_personality_id: slowest.sort((a, b) => b.ms - a.ms).slice(0, 6),
    load_average_1m: [loadBefore, load1()],
    goal: 'p99 <= 20 ms',
    goal_met:
      percentile(withPersonality, 99) <= 20 &&
      percentile(withoutPersonality, 99) <= 20 &&
      percentile(sameSentence, 99) <= 20,
  };
}

type Measured = LoadFigures & {
  service_cpu_ms_per_request: number;
  db_cpu_ms_per_request: number;
  memories_added: number;
  vacuum_seconds_after: number;
};

/**
 * (c) POST /v1/respond, local engine, 10 s at 32 connections, every request as one end user of
 * 20,000 memories. What the run added to that end user is deleted after it and the table
 * vacuumed (not timed), so every run starts from the same 20,000 memories.
 */
async function respondRun(
  service: RunningService,
  auth: string,
  personalityId: string,
  userId: string,
  messages: string[],
  db: Client,
  endUserId: string,
): Promise<Measured> {
  const maxBefore = (await db.query<{ id: string }>('SELECT max(id)::text AS id FROM memories'))
    .rows[0].id;
  let turn = 0;
  const serviceBefore = cpuSeconds(service.pid);
  const dbBefore = await backendCpu(service.databaseUrl);
  const figures = await load({
    url: `${service.baseUrl}/v1/respond`,
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: auth },
    connections: 32,
    durationSeconds: 10,
    requests: [
      {
        setupRequest: (request) => ({
          ...request,
          body: JSON.stringify({
            personality_id: personalityId,
            user_id: userId,
            message: messages[turn++ % messages.length],
          }),
        }),
      },
    ],
  });
  const serviceSeconds = cpuSeconds(service.pid) - serviceBefore;
  const dbSeconds = cpuBetween(dbBefore, await backendCpu(service.databaseUrl));
  const perRequest = (seconds: number) => round3((seconds * 1000) / Math.max(1, figures.requests));
  const deleted = await db.query(
    'DELETE FROM memories WHERE end_user_id = $1 AND id > $2::bigint',
    [endUserId, maxBefore],
  );
  const vacuumStarted = performance.now();
  await db.query('VACUUM memories');
  return {
    ...figures,
    service_cpu_ms_per_request: perRequest(serviceSeconds),
    db_cpu_ms_per_request: perRequest(dbSeconds),
    memories_added: deleted.rowCount ?? 0,
    vacuum_seconds_after: round2((performance.now() - vacuumStarted) / 1000),
  };
}

async function respondRatio(
  on: RunningService,
  off: RunningService,
  auth: string,
  personalityId: string,
  messages: string[],
  organizationId: string,
) {
  const db = new Client({ connectionString: on.databaseUrl });
  await db.connect();
  try {
    const idOf = async (userId: string) =>
      (
        await db.query<{ id: string }>(
          'SELECT id FROM end_users WHERE organization_id = $1 AND user_id = $2',
          [organizationId, userId],
        )
      ).rows[0].id;
    const heavy = await idOf(HEAVY);
    const twin = await idOf(TWIN);
    const runOn = () => respondRun(on, auth, personalityId, HEAVY, messages, db, heavy);
    const runOff = () => respondRun(off, auth, personalityId, TWIN, messages, db, twin);
    // Warm-up of both services' respond path (JIT, pools, prepared statements).
    await runOn();
    await runOff();
    const rounds: Array<{ load_average_1m: number; on: Measured; off: Measured }> = [];
    for (let i = 0; i < ROUNDS; i++) {
      // Alternating which goes first, so neither always follows the other.
      const round = {} as { on: Measured; off: Measured };
      if (i % 2 === 0) {
        round.on = await runOn();
        round.off = await runOff();
      } else {
        round.off = await runOff();
        round.on = await runOn();
      }
      rounds.push({ load_average_1m: load1(), ...round });
    }
    const medians = (variant: 'on' | 'off') => ({
      requests_per_sec: median(rounds.map((r) => r[variant].requests_per_sec)),
      latency_p50_ms: median(rounds.map((r) => r[variant].latency_p50_ms)),
      latency_p99_ms: median(rounds.map((r) => r[variant].latency_p99_ms)),
      service_cpu_ms_per_request: median(rounds.map((r) => r[variant].service_cpu_ms_per_request)),
      db_cpu_ms_per_request: median(rounds.map((r) => r[variant].db_cpu_ms_per_request)),
      errors_and_non_2xx: rounds.reduce(
        (sum, r) => sum + r[variant].errors + r[variant].non_2xx,
        0,
      ),
    });
    const onMedian = medians('on');
    const offMedian = medians('off');
    const ratio = round3(onMedian.requests_per_sec / offMedian.requests_per_sec);
    return {
      method: `two services on the same database, started alike but for MEMORY_RECALL_LIMIT (8, the default; 0); local engine, safety at its defaults; 10 s at 32 connections per run, ${ROUNDS} rounds alternating which goes first, medians. "on": every request as ${HEAVY} (20,000 memories with the personality, ${FACTS} facts); "off": as ${TWIN} (20,000 memories, no facts). Messages: generated chat in which the local engine finds no fact to learn. After each run its memories are deleted and the table vacuumed (not timed)`,
      on: onMedian,
      off: offMedian,
      on_to_off_requests_per_sec: ratio,
      per_round_ratio: rounds.map((r) => round3(r.on.requests_per_sec / r.off.requests_per_sec)),
      per_round: rounds,
      goal: 'on >= 0.85 of off (requests/s)',
      goal_met: ratio >= 0.85,
    };
  } finally {
    await db.end();
  }
}

/**
 * Cost at scale (issue 20): 1,000,000 memories in one organization (998 end users of about 960
 * memories over three personalities, and three of 20,000 with one personality), seeded straight
 * into the database with the service's tsvectors (support/scale-seed.ts), the service running on
 * it. (a) The recall read of a reply (findConversation's statement) p99, goal <= 10 ms, with its
 * plan; (b) the search endpoint p99, goal <= 20 ms; (c) /v1/respond with recall and facts on
 * against recall off and no facts, goal >= 0.85 of the rate.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  let on: RunningService | undefined;
  let off: RunningService | undefined;
  try {
    on = await startService();
    const tenant = await benchTenant(on.baseUrl);
    const personalities = [tenant.personalityId];
    for (const slug of ['sunny-coach', 'willow-listener']) {
      personalities.push(
        (await api(on, tenant.auth, '/v1/personalities/from-catalog', { slug })).id as string,
      );
    }
    const users: ScaleUser[] = [];
    const ordinaryMemories = TOTAL_MEMORIES - 3 * HEAVY_MEMORIES;
    const base = Math.floor(ordinaryMemories / ORDINARY_USERS);
    const extra = ordinaryMemories - base * ORDINARY_USERS;
    for (let i = 0; i < ORDINARY_USERS; i++) {
      users.push({
        userId: `scale-user-${i}`,
        personality: i % 3,
        memories: base + (i < extra ? 1 : 0),
      });
    }
    users.push({ userId: HEAVY, personality: 0, memories: HEAVY_MEMORIES });
    users.push({ userId: TWIN, personality: 0, memories: HEAVY_MEMORIES });
    users.push({
      userId: SAME,
      personality: 0,
      memories: HEAVY_MEMORIES,
      sentence: SAME_SENTENCE,
    });
    const seeded = await seedMemories(
      on.databaseUrl,
      tenant.organizationId,
      personalities,
      users,
      SEED,
    );

    const next = random(SEED + 1);
    const facts = [
      ...MEMORY_RECALL_EN.map((pair) => pair.statement),
      ...Array.from({ length: FACTS - MEMORY_RECALL_EN.length }, () => userSentence(next)),
    ];
    for (const content of facts) {
      await api(on, tenant.auth, `/v1/end-users/${HEAVY}/facts`, { content });
    }

    const messages = Array.from({ length: MESSAGES }, () => userMessage(next));
    const recall = await recallQuery(
      on.databaseUrl,
      tenant.organizationId,
      tenant.personalityId,
      'scale-user-0',
      messages,
    );
    const typical = 'I had a long day at work today and I feel a bit tired.';
    const plan = await explain(
      on.databaseUrl,
      tenant.organizationId,
      tenant.personalityId,
      HEAVY,
      typical,
    );
    const rarePlan = await explain(
      on.databaseUrl,
      tenant.organizationId,
      tenant.personalityId,
      HEAVY,
      'What was the name of my greyhound again?',
    );
    const sameSentencePlan = await explain(
      on.databaseUrl,
      tenant.organizationId,
      tenant.personalityId,
      SAME,
      SAME_SENTENCE,
    );
    const ordinaryPlan = await explain(
      on.databaseUrl,
      tenant.organizationId,
      tenant.personalityId,
      'scale-user-0',
      typical,
    );

    // A third each: chat sentences, questions (the recall set's, then generated ones), and one
    // or two words of a chat sentence, as a client's search box is used.
    const third = Math.floor(SEARCHES / 3);
    const words = (text: string) => text.toLowerCase().match(/[a-z]{4,}/g) ?? ['work'];
    const queries = {
      sentence: Array.from({ length: third }, () => userSentence(next)),
      question: [...MEMORY_RECALL_EN.map((pair) => pair.question)],
      keywords: Array.from({ length: SEARCHES - 2 * third }, () => {
        const found = words(userSentence(next));
        const first = found[Math.floor(next() * found.length)];
        return next() < 0.5 ? first : `${first} ${found[Math.floor(next() * found.length)]}`;
      }),
    };
    while (queries.question.length < third) {
      const sentence = userSentence(next);
      if (sentence.endsWith('?')) queries.question.push(sentence);
    }
    const search = await searchEndpoint(on, tenant.auth, tenant.personalityId, queries);

    off = await startService({ databaseUrl: on.databaseUrl, env: { MEMORY_RECALL_LIMIT: '0' } });
    const chat = Array.from({ length: 2_000 }, () => userMessage(next)).filter(
      (message) => extractFacts(message).length === 0,
    );
    const respond = await respondRatio(
      on,
      off,
      tenant.auth,
      tenant.personalityId,
      chat.slice(0, 500),
      tenant.organizationId,
    );

    return {
      load_average_at_start: loadAtStart,
      load_average_at_end: loadAverages(),
      machine_note:
        'a shared machine: 2 cores, other work running beside the bench (see the load averages); PostgreSQL 15 on the same machine, shared_buffers 128 MB, the table in the OS page cache',
      data: {
        ...seeded,
        organization: `${ORDINARY_USERS} end users of ${base}..${base + 1} memories, spread over 3 personalities, and 3 of ${HEAVY_MEMORIES} with one personality (${HEAVY}, ${FACTS} facts; ${TWIN}, none; ${SAME}, one sentence ${HEAVY_MEMORIES} times)`,
        text: 'generated chat (support/chat-text.ts): a user message 20..400 characters, a reply 80..1,200; exchanges of all end users interleaved over 400 days',
      },
      recall_query: recall,
      recall_query_plan: plan,
      recall_query_plan_rare_words: rarePlan,
      recall_query_plan_ordinary_user: ordinaryPlan,
      recall_query_plan_same_sentence_user: sameSentencePlan,
      search_endpoint: search,
      respond_recall_and_facts_on_vs_off: respond,
    };
  } finally {
    await off?.stop();
    await on?.stop();
  }
}
