import { createHash } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** The dimensions of the fake's vectors: enough that two concepts rarely share one. */
export const FAKE_DIMENSIONS = 256;

/**
 * Words that mean the same thing to the fake embedder, by concept. Everything else is a concept
 * of its own (its lower-cased word), and stop words are nothing.
 */
const SYNONYMS: Record<string, readonly string[]> = {
  travel: [
    'holiday',
    'holidays',
    'vacation',
    'trip',
    'travel',
    'journey',
    'crete',
    'island',
    'beach',
    'abroad',
    'urlaub',
    'reise',
  ],
  pet: ['dog', 'puppy', 'pet', 'greyhound', 'cat', 'kitten', 'hund'],
  work: ['job', 'work', 'career', 'office', 'employer', 'colleague', 'colleagues', 'arbeit'],
  music: ['music', 'band', 'song', 'songs', 'concert', 'guitar', 'gig'],
  food: ['food', 'dish', 'meal', 'pasta', 'cook', 'cooking', 'dinner', 'eat'],
  family: ['sister', 'brother', 'mother', 'father', 'mum', 'dad', 'family', 'sibling'],
};

const STOP_WORDS = new Set(
  'a an and are as at be did do does for from go had has have how i in is it me my of on or our so that the they this to was we went were what when where which who why with you your'.split(
    ' ',
  ),
);

const CONCEPT_OF = new Map<string, string>(
  Object.entries(SYNONYMS).flatMap(([concept, words]) => words.map((word) => [word, concept])),
);

/**
 * A deterministic embedder: each word's concept is one dimension (by a hash of its name), the
 * vector the sum of its words'. Texts sharing a concept have a cosine above 0; "Where did I go on
 * holiday?" and "We spent two weeks in Crete" share none of their words and meet at 'travel'.
 */
export function fakeEmbedding(text: string, dimensions = FAKE_DIMENSIONS): number[] {
  const vector = new Array<number>(dimensions).fill(0);
  for (const word of text.toLowerCase().match(/\p{L}+/gu) ?? []) {
    if (STOP_WORDS.has(word)) continue;
    const concept = CONCEPT_OF.get(word) ?? word;
    const digest = createHash('sha256').update(concept).digest();
    vector[digest.readUInt32BE(0) % dimensions] += 1;
  }
  return vector;
}

export interface RecordedEmbeddingsRequest {
  path: string;
  authorization: string | undefined;
  model: string | undefined;
  /** The `dimensions` asked for, if any (the vectors then have that many). */
  dimensions: number | undefined;
  input: string[];
  /** The answer's status: 200, or the failure the fake was told to give. */
  status: number;
}

/**
 * An OpenAI-compatible `POST /v1/embeddings` on loopback for the specs (the `openai` SDK talks to
 * it through EMBEDDINGS_BASE_URL, `fake.url`). Answers with fakeEmbedding's vectors in OpenAI's
 * wire format, records every request, and on demand fails (an HTTP status with OpenAI's error
 * body) or answers late.
 */
export class FakeEmbeddings {
  readonly requests: RecordedEmbeddingsRequest[] = [];
  /** Answer every request with this status until `recover()`; null: answer. */
  private failure: number | null = null;
  private delayMs = 0;
  /** A request holding a text with this in it is refused with 400, as a too-long input is. */
  private refused: string | null = null;
  private server: Server | undefined;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/v1`;
  }

  /** Every text sent, in order, across requests. */
  get inputs(): string[] {
    return this.requests.flatMap((request) => request.input);
  }

  failWith(status: number): void {
    this.failure = status;
  }

  /** Refuses (400) every request holding a text that contains `marker`; null: none. */
  refuse(marker: string | null): void {
    this.refused = marker;
  }

  /** Answers after `ms` (0: at once). */
  delay(ms: number): void {
    this.delayMs = ms;
  }

  recover(): void {
    this.failure = null;
    this.delayMs = 0;
  }

  async start(): Promise<void> {
    this.server = createServer((request, response) => void this.handle(request, response));
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (!server) return;
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'POST' || !/^(\/v1)?\/embeddings$/.test(path)) {
      return this.send(response, 404, {
        error: { message: 'Not found', type: 'invalid_request_error' },
      });
    }
    let body: { model?: string; input?: unknown; dimensions?: number };
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
    } catch {
      return this.send(response, 400, {
        error: { message: 'Body is not JSON', type: 'invalid_request_error' },
      });
    }
    const input =
      typeof body.input === 'string'
        ? [body.input]
        : Array.isArray(body.input)
          ? body.input.map(String)
          : [];
    const refused = this.refused !== null && input.some((text) => text.includes(this.refused!));
    const status = this.failure ?? (refused ? 400 : 200);
    this.requests.push({
      path,
      authorization: request.headers.authorization,
      model: body.model,
      dimensions: body.dimensions,
      input,
      status,
    });
    if (this.delayMs > 0) {
      await new Promise((resolve) => setTimeout(resolve, this.delayMs));
      if (response.destroyed) return;
    }
    if (status !== 200) {
      return this.send(response, status, {
        error: {
          message: `The fake was told to fail with ${status}`,
          type: 'server_error',
          code: null,
        },
      });
    }
    this.send(response, 200, {
      object: 'list',
      model: body.model,
      data: input.map((text, index) => ({
        object: 'embedding',
        index,
        embedding: fakeEmbedding(text, body.dimensions),
      })),
      usage: { prompt_tokens: input.length, total_tokens: input.length },
    });
  }

  private send(response: ServerResponse, status: number, body: unknown): void {
    if (response.destroyed) return;
    response.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  }
}
