import { type RunningService, startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';
import { loadAverages, round2, sleep, timings } from './support/stats';

/**
 * Uploading a 1 MiB document (issue 31, "Figures": searchable in ≤ 1 s, peak RSS growth ≤
 * 32 MiB): each way of uploading on an instance of the built service of its own, on a fresh
 * database. Each sample uploads a new
 * document of exactly 1,048,576 bytes of prose (about 1,100 chunks), as JSON, as a multipart
 * plain-text file, or as a multipart HTML page of at most 1 MiB (the file limit), then searches for a
 * word only its last sentence holds; the time is from sending the upload to the search answering
 * with the document. The service's peak RSS (VmHWM) is read before the first upload, after it
 * and after the last.
 */

const SAMPLES = Number(process.env.BENCH_KNOWLEDGE_UPLOAD_SAMPLES ?? 5);
const MIB = 1_048_576;
const WORDS = ['store', 'opening', 'hours', 'product', 'policy', 'delivery', 'garden', 'lamp'];

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** Room left for the HTML page's markup: its file, like any, holds at most 1 MiB. */
const MARKUP_BYTES = 20_000;

/** Sentences of ordinary words, `bytes` long exactly, the last holding `marker` only. */
function prose(bytes: number, marker: string): string {
  const last = ` The final note mentions ${marker}.`;
  const parts: string[] = [];
  let length = 0;
  for (let i = 0; length < bytes - last.length; i++) {
    const sentence =
      (i % 12 === 11 ? '\n\n' : ' ') +
      `The ${WORDS[i % 8]} ${WORDS[(i * 3) % 8]} note ${i} covers ${WORDS[(i * 5) % 8]} for everyone.`;
    parts.push(sentence);
    length += sentence.length;
  }
  return (parts.join('') + last).slice(-bytes).replace(/^\s+/, 'x');
}

function html(text: string): string {
  const paragraphs = text.split('\n\n').map((p) => `<p>${p}</p>`);
  return `<!doctype html><html><body><h1>Handbook</h1>${paragraphs.join('')}</body></html>`;
}

async function upload(
  service: RunningService,
  auth: string,
  kind: 'json' | 'text' | 'html',
  text: string,
): Promise<number> {
  const url = `${service.baseUrl}/v1/knowledge`;
  let response: Response;
  if (kind === 'json') {
    response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: auth },
      body: JSON.stringify({ title: 'Handbook', content: text }),
    });
  } else {
    const form = new FormData();
    form.set('title', 'Handbook');
    const type = kind === 'html' ? 'text/html' : 'text/plain';
    form.set('file', new Blob([kind === 'html' ? html(text) : text], { type }), 'handbook');
    response = await fetch(url, { method: 'POST', headers: { authorization: auth }, body: form });
  }
  const body = (await response.json()) as Json;
  if (response.status !== 201)
    throw new Error(`upload: ${response.status} ${JSON.stringify(body)}`);
  return body.chunks as number;
}

async function found(service: RunningService, auth: string, marker: string): Promise<boolean> {
  const response = await fetch(
    `${service.baseUrl}/v1/knowledge/search?q=${encodeURIComponent(marker)}&limit=1`,
    { headers: { authorization: auth } },
  );
  const body = (await response.json()) as Json;
  return response.status === 200 && body.data.length === 1;
}

/** One kind on a service of its own: the peak RSS growth of its first upload, then the times. */
async function measure(kind: 'json' | 'text' | 'html') {
  const service = await startService({ env: { LOG_LEVEL: 'warn' } });
  try {
    const tenant = await benchTenant(service.baseUrl);
    // One small upload first, so start-up work (the worker thread's code, prepared statements)
    // is not counted.
    await upload(service, tenant.auth, kind, 'Warm up.');
    await sleep(500);
    const before = memoryOf(service.pid);
    const ms: number[] = [];
    let chunks = 0;
    let peakAfterFirst = 0;
    let bytes = 0;
    for (let i = 0; i < SAMPLES; i++) {
      const marker = `quokka${kind}${i}zebra`;
      const text = prose(kind === 'html' ? MIB - MARKUP_BYTES : MIB, marker);
      bytes = Buffer.byteLength(kind === 'html' ? html(text) : text);
      const started = performance.now();
      chunks = await upload(service, tenant.auth, kind, text);
      if (!(await found(service, tenant.auth, marker))) {
        throw new Error(`${kind} sample ${i}: the last sentence is not searchable`);
      }
      ms.push(performance.now() - started);
      if (i === 0) peakAfterFirst = memoryOf(service.pid).hwm_mib;
    }
    const after = memoryOf(service.pid);
    return {
      document_bytes: bytes,
      chunks,
      upload_until_searchable: timings(ms),
      service_memory_mib: {
        rss_before: round2(before.rss_mib),
        peak_before: round2(before.hwm_mib),
        peak_growth_first_upload: round2(peakAfterFirst - before.hwm_mib),
        peak_growth_all_uploads: round2(after.hwm_mib - before.hwm_mib),
      },
    };
  } finally {
    await service.stop();
  }
}

export async function run(): Promise<Record<string, unknown>> {
  const loadAtStart = loadAverages();
  const byKind = {
    json: await measure('json'),
    text: await measure('text'),
    html: await measure('html'),
  };
  const kinds = Object.values(byKind);
  return {
    load_average_at_start: loadAtStart,
    load_average_at_end: loadAverages(),
    method: `For each way of uploading, one instance of the built service (node dist/main.js) on a fresh database: ${SAMPLES} uploads, one at a time, of a new document of exactly ${MIB} bytes of prose (as JSON content, as a multipart text/plain file; as ${MIB - MARKUP_BYTES} bytes of it in <p> elements of a multipart text/html file of at most ${MIB} bytes), each followed by a search for a word only its last sentence holds: time from sending the upload to the search answering with it. The service's peak RSS (VmHWM) read after a small warm-up upload, after the first 1 MiB upload and after the last (garbage of earlier uploads not yet collected counts in the latter).`,
    by_kind: byKind,
    goals: {
      '1 MiB upload searchable in <= 1 s (slowest sample, every kind)': kinds.every(
        (k) => k.upload_until_searchable.max_ms <= 1000,
      ),
      '1 MiB upload peak RSS growth <= 32 MiB (first upload, every kind)': kinds.every(
        (k) => k.service_memory_mib.peak_growth_first_upload <= 32,
      ),
    },
  };
}
