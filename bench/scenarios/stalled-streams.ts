import { execFileSync } from 'node:child_process';
import { request as httpRequest, type ClientRequest } from 'node:http';
import { loadavg } from 'node:os';
import { FakeOpenAI } from '../../test/support/fake-openai';
import { startService } from '../lib/service';
import { benchTenant, memoryOf } from './support/data-plane';

/** Streams that never read, opened at once by one organization. */
const STREAMS = 20;
/** Each reply the fake provider streams: 6 MiB of text, in 4 KiB pieces. */
const REPLY_BYTES = Number(process.env.BENCH_REPLY_MIB ?? 6) * 1024 * 1024;
const PIECE_BYTES = 4 * 1024;
/** How long the streams are held open, RSS sampled every 20 ms. */
const HOLD_MS = 8_000;

/** The send queue (bytes) of the service's sockets on `port`, from `ss` (Linux). */
function socketQueues(port: string): { sendQueue: number } {
  try {
    const lines = execFileSync('ss', ['-tnH', `( sport = :${port} )`], { encoding: 'utf8' });
    let sendQueue = 0;
    for (const line of lines.split('\n')) {
      const fields = line.trim().split(/\s+/);
      if (fields.length >= 3) sendQueue += Number(fields[2]) || 0;
    }
    return { sendQueue };
  } catch {
    return { sendQueue: Number.NaN };
  }
}

/** Starts a streamed /v1/respond and never reads its body: the client that stops reading. */
function stalledStream(
  baseUrl: string,
  auth: string,
  body: Record<string, unknown>,
): Promise<{ status: number; request: ClientRequest }> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(body);
    const request = httpRequest(
      `${baseUrl}/v1/respond`,
      {
        method: 'POST',
        headers: {
          authorization: auth,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        },
      },
      (response) => {
        response.pause();
        resolve({ status: response.statusCode ?? 0, request });
      },
    );
    request.on('error', (error) => (request.destroyed ? undefined : reject(error)));
    request.end(payload);
  });
}

/**
 * A non-reading streamed client (contract §25, "Backpressure"): one organization opens 20
 * streamed `/v1/respond` calls whose provider (the fake OpenAI server of the tests, streaming a
 * 6 MiB reply as fast as it can) would fill the service's memory if nothing paused it, and
 * never reads a byte. The service's resident memory (/proc/<pid>/status) is sampled while they
 * are held. Goal: RSS growth per stream ≤ 2 MiB (the stream buffer is 1 MiB; before it, one such
 * stream buffered about 50 MB).
 */
export async function run(): Promise<Record<string, unknown>> {
  const fake = await FakeOpenAI.start({ apiKey: 'sk-bench' });
  const service = await startService({
    env: {
      RESPONSE_ENGINE: 'openai',
      OPENAI_BASE_URL: fake.url,
      OPENAI_API_KEY: 'sk-bench',
      OPENAI_MODEL: 'bench-model',
      STREAMS_PER_ORG: String(STREAMS),
      // Longer than the hold: the streams stay open for the whole measurement.
      STREAM_IDLE_TIMEOUT_MS: '60000',
      ENGINE_TIMEOUT_MS: '60000',
      LOG_LEVEL: 'warn',
    },
  });
  const held: ClientRequest[] = [];
  try {
    const tenant = await benchTenant(service.baseUrl);
    const text = 'word '.repeat(REPLY_BYTES / 5);
    fake.respondAlwaysWith({ content: text, stream: { chunkSize: PIECE_BYTES } });
    const body = (n: number) => ({
      personality_id: tenant.personalityId,
      user_id: `bench-stalled-${n}`,
      message: 'tell me everything',
      stream: true,
    });

    // Warm-up: two streams read to the end (JIT, pools), then settle before the baseline.
    for (let n = 0; n < 2; n++) {
      const response = await fetch(`${service.baseUrl}/v1/respond`, {
        method: 'POST',
        headers: { authorization: tenant.auth, 'content-type': 'application/json' },
        body: JSON.stringify({ ...body(1000 + n), stream: true }),
      });
      await response.arrayBuffer();
    }
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const before = memoryOf(service.pid);
    let peakRss = before.rss_mib;
    const sampler = setInterval(() => {
      peakRss = Math.max(peakRss, memoryOf(service.pid).rss_mib);
    }, 20);
    const loadBefore = loadavg()[0];
    const opened = await Promise.all(
      Array.from({ length: STREAMS }, (_, n) =>
        stalledStream(service.baseUrl, tenant.auth, body(n)),
      ),
    );
    held.push(...opened.map((stream) => stream.request));
    await new Promise((resolve) => setTimeout(resolve, HOLD_MS));
    clearInterval(sampler);
    const queues = socketQueues(new URL(service.baseUrl).port);
    const after = memoryOf(service.pid);
    peakRss = Math.max(peakRss, after.rss_mib);
    const growth = peakRss - before.rss_mib;
    return {
      description:
        'One organization opens 20 streamed /v1/respond calls and never reads them; the provider (the tests’ fake OpenAI server on loopback) streams a 6 MiB reply to each as fast as it is read. Service RSS sampled every 20 ms for 8 s',
      streams: STREAMS,
      statuses: opened.map((stream) => stream.status),
      reply_bytes_offered_per_stream: REPLY_BYTES,
      rss_before_mib: Number(before.rss_mib.toFixed(1)),
      rss_peak_during_mib: Number(peakRss.toFixed(1)),
      rss_growth_mib: Number(growth.toFixed(1)),
      rss_growth_per_stream_mib: Number((growth / STREAMS).toFixed(2)),
      kernel_send_queue_per_stream_mib: Number((queues.sendQueue / STREAMS / 2 ** 20).toFixed(2)),
      note: 'What the kernel holds for a client that does not read (the service socket’s send queue, the client’s receive queue) is not the service’s memory, but the service has read that much more of the provider’s reply before its own 1 MiB buffer fills, and keeps the reply read so far (it is stored when the reply ends)',
      machine_load_average_1m: { before: loadBefore, after: loadavg()[0] },
      goal: 'rss_growth_per_stream_mib <= 2',
    };
  } finally {
    for (const request of held) request.destroy();
    await service.stop();
    await fake.close();
  }
}
