import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { loadavg } from 'node:os';
import { cpuSeconds } from '../lib/cpu';
import { startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';

const MEMORIES = 10_000;
const FACTS = 30;
/** IMPORT_MAX_BYTES's default: the largest document an import takes. */
const MAX_BYTES = 16 * 1_024 * 1_024;
/** Imports run at once in the concurrent part (IMPORTS_IN_FLIGHT set to it for the bench). */
const CONCURRENT = 4;

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- API answers, read loosely
type Json = Record<string, any>;

const WORDS = (
  'the a and to of I you it that was my is in for on with this but so me we just have had ' +
  'really think feel today work friend sister weekend dinner coffee morning train late bike ' +
  'dog walk park garden book music concert job interview meeting project deadline holiday ' +
  'trip beach mountain weather rain sun tired happy worried excited grateful proud nervous ' +
  'remember tomorrow yesterday week month plan idea question answer story moment again ' +
  'always never maybe perhaps quite very little much better worse home city station'
).split(' ');

/** A deterministic generator (mulberry32), so every run imports the same document. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state + 0x6d2b79f5) | 0;
    let t = Math.imul(state ^ (state >>> 15), 1 | state);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Sentences of about `characters` characters. */
function text(next: () => number, characters: number): string {
  let out = '';
  while (out.length < characters) {
    const words = 6 + Math.floor(next() * 12);
    const sentence = Array.from({ length: words }, () => WORDS[Math.floor(next() * WORDS.length)]);
    sentence[0] = sentence[0][0].toUpperCase() + sentence[0].slice(1);
    out += `${out ? ' ' : ''}${sentence.join(' ')}${next() < 0.2 ? '?' : '.'}`;
  }
  return out;
}

/**
 * A conversation of `memories` messages with one personality, of the lengths chat has: a user's
 * message 20..400 characters (most short), a reply 80..1,200 (about three times as long), over
 * the last 200 days; `facts` facts, most learned from a user's message.
 */
function conversation(personality: Json, userId: string, memories: number, facts: number): Json {
  const next = random(20_260_101);
  const end = Date.now() - 60_000;
  const start = end - 200 * 86_400_000;
  const emotions = ['joy', 'gratitude', 'sadness', 'curiosity', 'neutral', 'optimism', 'caring'];
  const messages = Array.from({ length: memories }, (_, i) => {
    const user = i % 2 === 0;
    const length = user ? 20 + Math.floor(next() ** 2 * 380) : 80 + Math.floor(next() * 1_120);
    return {
      id: String(1_000 + i),
      personality_id: personality.id,
      role: user ? 'user' : 'personality',
      content: text(next, length),
      emotion: { name: emotions[Math.floor(next() * emotions.length)], intensity: 0.5 },
      vocabulary_version: '2.0.0',
      created_at: new Date(start + Math.floor(((end - start) * i) / memories)).toISOString(),
    };
  });
  const learned = Array.from({ length: facts }, (_, i) => {
    const source = messages[Math.floor((i * memories) / facts) & ~1]; // a user's message
    return {
      id: randomUUID(),
      content: `Fact ${i}: ${text(next, 40)}`,
      source: i % 5 === 0 ? 'api' : 'engine',
      memory_id: i % 5 === 0 ? null : source.id,
      created_at: source.created_at,
      updated_at: source.created_at,
    };
  });
  const at = new Date(end).toISOString();
  return {
    format: 'pmf',
    version: 1,
    exported_at: at,
    end_user: {
      user_id: userId,
      metadata: { plan: 'pro' },
      status: 'active',
      created_at: messages[0].created_at,
      updated_at: at,
    },
    personalities: [personality],
    relationships: [],
    memories: messages,
    facts: learned,
  };
}

/** A conversation whose document is as close under `bytes` as whole messages allow. */
function documentOf(personality: Json, userId: string, bytes: number): Buffer {
  // Lengths follow the generator: about 650 bytes a message; grown until the next step overshoots.
  let memories = Math.floor(bytes / 700);
  let body = Buffer.from(JSON.stringify(conversation(personality, userId, memories, FACTS)));
  for (;;) {
    const more = Math.max(10, Math.floor(((bytes - body.length) / body.length) * memories * 0.9));
    const next = Buffer.from(
      JSON.stringify(conversation(personality, userId, memories + more, FACTS)),
    );
    if (next.length > bytes || more <= 10) return body.length <= bytes ? body : next;
    memories += more;
    body = next;
  }
}

/**
 * Samples the service's resident memory every 10 ms while `work` runs, the kernel's peak (VmHWM)
 * reset just before (/proc/<pid>/clear_refs), and answers how far above `before` it went.
 */
async function peakDuring<T>(
  pid: number,
  work: () => Promise<T>,
): Promise<{
  result: T;
  before_mib: number;
  peak_mib: number;
  growth_mib: number;
  hwm_reset: boolean;
  seconds: number;
  cpu_seconds: number;
}> {
  const before = memoryOf(pid).rss_mib;
  let hwmReset = true;
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
  } catch {
    hwmReset = false;
  }
  let peak = before;
  const sampler = setInterval(() => {
    peak = Math.max(peak, memoryOf(pid).rss_mib);
  }, 10);
  const cpuBefore = cpuSeconds(pid);
  const start = process.hrtime.bigint();
  try {
    const result = await work();
    const after = memoryOf(pid);
    peak = Math.max(peak, after.rss_mib, hwmReset ? after.hwm_mib : 0);
    return {
      result,
      before_mib: Number(before.toFixed(1)),
      peak_mib: Number(peak.toFixed(1)),
      growth_mib: Number((peak - before).toFixed(1)),
      hwm_reset: hwmReset,
      seconds: Number((Number(process.hrtime.bigint() - start) / 1e9).toFixed(2)),
      cpu_seconds: Number((cpuSeconds(pid) - cpuBefore).toFixed(2)),
    };
  } finally {
    clearInterval(sampler);
  }
}

/** The tenant's personality as a document carries it. */
async function personalityDocument(
  baseUrl: string,
  tenant: { auth: string; personalityId: string },
): Promise<Json> {
  const personality = (await (
    await fetch(`${baseUrl}/v1/personalities/${tenant.personalityId}`, {
      headers: { authorization: tenant.auth },
    })
  ).json()) as Json;
  return {
    id: personality.id,
    source_slug: personality.source_slug,
    source_version: personality.source_version,
    name: personality.name,
    description: personality.description,
    traits: personality.traits,
    voice: personality.voice,
    system_prompt: personality.system_prompt,
    language: personality.language,
    replies: personality.replies,
  };
}

/**
 * `count` imports of a document just under IMPORT_MAX_BYTES at once, IMPORTS_IN_FLIGHT set to
 * `count`, in a service of their own after one warm-up import of 1,000 messages: the peak of its
 * resident memory above what it held before.
 */
async function largestImports(count: number): Promise<Record<string, unknown>> {
  const service = await startService({ env: { IMPORTS_IN_FLIGHT: String(count) } });
  try {
    const tenant = await benchTenant(service.baseUrl);
    const personality = await personalityDocument(service.baseUrl, tenant);
    const post = async (body: Buffer) => {
      const answered = await fetch(`${service.baseUrl}/v1/end-users/import`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenant.auth },
        body,
      });
      const json = (await answered.json()) as Json;
      if (answered.status !== 201) {
        throw new Error(`import: ${answered.status} ${JSON.stringify(json)}`);
      }
      return json;
    };
    await post(Buffer.from(JSON.stringify(conversation(personality, 'bench-warm-up', 1_000, 10))));
    const documents = Array.from({ length: count }, (_, i) =>
      documentOf(personality, `bench-16mib-${i}`, MAX_BYTES),
    );
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    const measured = await peakDuring(service.pid, () => Promise.all(documents.map(post)));
    return {
      imports: count,
      document_bytes: documents[0].length,
      memories_each: measured.result[0].memories_imported,
      ...measured,
      result: undefined,
      goal:
        count === 1
          ? 'peak RSS growth <= 48 MiB'
          : 'peak RSS growth <= 200 MiB (before: 307 -> 780 MiB, issue 28)',
    };
  } finally {
    await service.stop();
  }
}

/**
 * POST /v1/end-users/import of generated documents (realistic lengths, 30 facts) into the
 * organization their personality belongs to, the server's resident memory sampled every 10 ms and
 * its peak (VmHWM) reset before each part (/proc/<pid>/clear_refs), so the peak read after is the
 * part's:
 * - one document just under IMPORT_MAX_BYTES (16 MiB): peak RSS growth ≤ 48 MiB (contract §29);
 * - four such documents at once, IMPORTS_IN_FLIGHT set to 4: peak RSS growth ≤ 200 MiB (issue 28
 *   measured 307 → 780 MiB before);
 * - a 10,000-message document (about 6.5 MB), the figure measured before the import read its
 *   document as a stream.
 */
export async function run(): Promise<Record<string, unknown>> {
  const loadAverage = loadavg().map((value) => Number(value.toFixed(2)));
  // The largest documents first, each part in a service of its own, warmed up alike.
  const one = await largestImports(1);
  const many = await largestImports(CONCURRENT);
  const service = await startService();
  try {
    const tenant = await benchTenant(service.baseUrl);
    const asDocument = await personalityDocument(service.baseUrl, tenant);
    const post = (document: Json) =>
      fetch(`${service.baseUrl}/v1/end-users/import`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: tenant.auth },
        body: JSON.stringify(document),
      });

    // One warm-up import (JIT, the statements' plans), then settle before the baseline.
    const idle = memoryOf(service.pid);
    const warm = await post(conversation(asDocument, 'bench-warm-up', 1_000, 10));
    if (warm.status !== 201) throw new Error(`warm-up: ${warm.status} ${await warm.text()}`);
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    const document = conversation(asDocument, 'bench-imported', MEMORIES, FACTS);
    const body = JSON.stringify(document);
    const contents = document.memories.map((m: Json) => m.content.length as number);
    const byRole = (role: string) => {
      const lengths = document.memories
        .filter((m: Json) => m.role === role)
        .map((m: Json) => m.content.length as number);
      return Math.round(lengths.reduce((sum: number, n: number) => sum + n, 0) / lengths.length);
    };

    const before = memoryOf(service.pid);
    let hwmReset = true;
    try {
      writeFileSync(`/proc/${service.pid}/clear_refs`, '5');
    } catch {
      hwmReset = false;
    }
    let peakRss = before.rss_mib;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, memoryOf(service.pid).rss_mib);
    }, 10);
    const cpuBefore = cpuSeconds(service.pid);
    const start = process.hrtime.bigint();
    const response = await fetch(`${service.baseUrl}/v1/end-users/import`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: tenant.auth },
      body,
    });
    const answer = (await response.json()) as Json;
    const seconds = Number(process.hrtime.bigint() - start) / 1e9;
    clearInterval(sampler);
    const cpu = cpuSeconds(service.pid) - cpuBefore;
    const after = memoryOf(service.pid);
    peakRss = Math.max(peakRss, after.rss_mib);
    if (response.status !== 201)
      throw new Error(`import: ${response.status} ${JSON.stringify(answer)}`);
    if (answer.memories_imported !== MEMORIES || answer.facts_imported !== FACTS) {
      throw new Error(`import answered ${JSON.stringify(answer)}`);
    }

    return {
      load_average_at_start: loadAverage,
      largest_document: { one_import: one, [`${CONCURRENT}_concurrent_imports`]: many },
      memories: MEMORIES,
      facts: FACTS,
      document_bytes: Buffer.byteLength(body),
      mean_characters: { user: byRole('user'), personality: byRole('personality') },
      longest_characters: Math.max(...contents),
      answer,
      seconds: Number(seconds.toFixed(2)),
      memories_per_sec: Math.round(MEMORIES / seconds),
      service_cpu_seconds: Number(cpu.toFixed(2)),
      rss_idle_before_warm_up_mib: Number(idle.rss_mib.toFixed(1)),
      rss_before_mib: Number(before.rss_mib.toFixed(1)),
      rss_peak_sampled_mib: Number(peakRss.toFixed(1)),
      rss_growth_sampled_mib: Number((peakRss - before.rss_mib).toFixed(1)),
      ...(hwmReset
        ? {
            vm_hwm_during_mib: Number(after.hwm_mib.toFixed(1)),
            hwm_growth_mib: Number((after.hwm_mib - before.rss_mib).toFixed(1)),
          }
        : { vm_hwm_reset: 'not permitted: only the sampled figure counts' }),
      goal: 'peak RSS growth < 64 MiB',
    };
  } finally {
    await service.stop();
  }
}
