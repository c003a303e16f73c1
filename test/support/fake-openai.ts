import { triggeredCalls } from '../../src/respond/engine/tool-trigger';
import { randomBytes } from 'node:crypto';
import { EventEmitter } from 'node:events';
import {
  createServer,
  IncomingHttpHeaders,
  IncomingMessage,
  Server,
  ServerResponse,
} from 'node:http';
import type { AddressInfo } from 'node:net';

/**
 * An OpenAI-compatible Chat Completions API on loopback for the specs: the official `openai` SDK
 * talks to it through OPENAI_BASE_URL (`fake.url`, e.g. `http://127.0.0.1:PORT/v1`). It answers
 * `POST /v1/chat/completions` (and `/chat/completions`) in OpenAI's wire format, streamed (SSE
 * chunks, the usage chunk when `stream_options.include_usage` is set, `data: [DONE]`) or not,
 * records every request (every SDK retry is one more), and follows a script: the next requests'
 * replies in a queue (`respondWith`), else a standing reply (`respondAlwaysWith`), else the
 * default, a JSON `{text, emotion, intensity}` echoing the last user message. By default it also
 * calls a function tool the request offers when the last message is the user's and writes
 * `T({...})`, as the local engine does (docs/tools.md), so a client can be tested against it.
 *
 * A reply can be plain or broken content, a refusal, other token counts, slow, never answered, an HTTP error
 * with OpenAI's error body (with `retry-after-ms` or `retry-after`), a body of garbage, headers
 * and then nothing, a connection reset before any header, or a stream that stalls, drops the
 * connection or sends an error mid-way. Several fakes at once stand for several providers.
 * Requests the client gave up on (an aborted signal, a timeout) are counted in `aborted`.
 */

export interface ChatMessage {
  role: string;
  content: string | Array<{ type: string; text?: string }> | null;
  [key: string]: unknown;
}

/** What the service sends: the fields the fake reads, and whatever else came with them. */
export interface ChatCompletionBody {
  model?: string;
  messages?: ChatMessage[];
  stream?: boolean;
  stream_options?: { include_usage?: boolean } | null;
  response_format?: {
    type: string;
    json_schema?: { name: string; strict?: boolean; schema?: unknown };
  };
  [key: string]: unknown;
}

export interface RecordedChatRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  authorization: string | undefined;
  /** The SDK's `x-stainless-retry-count`: 0 on a first attempt, 1 on the first retry… */
  retryCount: number | undefined;
  rawBody: string;
  /** The parsed JSON body; undefined when it was not JSON. */
  body: ChatCompletionBody | undefined;
  /** The client closed the connection before the reply was complete. */
  aborted: boolean;
  /**
   * `performance.now()` when the first content chunk of a streamed reply was written: the
   * provider's first token, for a benchmark's time-to-first-byte on the same clock.
   */
  firstContentAt?: number;
}

export interface FakeUsage {
  prompt_tokens: number;
  completion_tokens: number;
  /** Sent as `prompt_tokens_details.cached_tokens` (OpenAI's prompt caching) when given. */
  cached_tokens?: number;
}

export interface FakeError {
  status: number;
  /** Defaults follow what OpenAI answers for the status (e.g. 429 `rate_limit_exceeded`). */
  message?: string;
  type?: string;
  code?: string | null;
  /**
   * Sent as `retry-after-ms`, which the SDK obeys before retrying a 408/409/429/5xx (default 0, so
   * retries in tests are immediate; null sends no header and the SDK backs off 0.5 s, 1 s…).
   */
  retryAfterMs?: number | null;
  /** Sent as `retry-after` (seconds or an HTTP date), as most servers other than OpenAI do. */
  retryAfter?: string;
}

/** A 200 (or other) answer whose body is whatever is given: a provider answering garbage. */
export interface FakeRaw {
  status?: number;
  contentType?: string;
  body: string;
}

export interface FakeStream {
  /** Content pieces of at most this many characters (default 8), unless `chunks` is given. */
  chunkSize?: number;
  /** Split the content into exactly this many pieces instead. */
  chunks?: number;
  /** Wait between two content chunks (default 0: all at once). */
  intervalMs?: number;
  /** Send this many content chunks, then nothing more, never ending the response. */
  stallAfter?: number;
  /** Send this many content chunks, then destroy the connection (a provider failing mid-way). */
  dropAfter?: number;
  /** Send this many content chunks, then an SSE `{"error": …}` event and end (the SDK throws). */
  errorAfter?: number;
}

export type FakeContent = string | string[] | Record<string, unknown>;

export interface FakeReply {
  /**
   * The assistant's content: a string as is, an object as its JSON, an array as the streamed
   * pieces (joined when not streamed), or a function of the request. Default: the JSON
   * `{"text": "echo: <last user message>", "emotion": "joy", "intensity": 0.6}`.
   */
  content?: FakeContent | ((request: RecordedChatRequest) => FakeContent);
  /**
   * The model refuses, as OpenAI's models do under a JSON schema: `content: null` and this text
   * as `refusal` (streamed: `delta.refusal` pieces, then the finish reason). Overrides `content`.
   */
  refusal?: string;
  /**
   * Reported token counts (default: about one token per 4 characters, in and out); null reports
   * none, as some OpenAI-compatible servers do (no `usage`, no usage chunk).
   */
  usage?: FakeUsage | null;
  finishReason?: 'stop' | 'length' | 'content_filter';
  /** Wait this long before answering at all. */
  delayMs?: number;
  /** Never answer (until the client gives up, `reset` or `close`). */
  hang?: boolean;
  /** Answer this HTTP error instead. */
  error?: FakeError;
  /** Answer this instead of a completion (garbage with a 200, HTML from a proxy…). */
  raw?: FakeRaw;
  /** Send the response's headers (200, JSON or SSE as asked), then nothing more, ever. */
  hangAfterHeaders?: boolean;
  /** Close the connection without answering at all (a reset before any response header). */
  reset?: boolean;
  /** How a streamed request is answered (ignored when the request did not ask to stream). */
  stream?: FakeStream;
  /**
   * The model calls these function tools instead of answering: `content: null`, `tool_calls`
   * and finish reason `tool_calls` (streamed: each call's id and name, then its arguments in two
   * pieces, as OpenAI streams them). `arguments` is the JSON text the model wrote. With `content`
   * set too, the model says it before its calls (streamed: its pieces first).
   */
  toolCalls?: Array<{ id: string; name: string; arguments: string }>;
}

export interface FakeOpenAIOptions {
  /** When set, a request without `Authorization: Bearer <apiKey>` gets OpenAI's 401. */
  apiKey?: string;
}

const ERROR_DEFAULTS: Record<number, { message: string; type: string; code: string | null }> = {
  400: { message: 'Invalid request.', type: 'invalid_request_error', code: null },
  401: {
    message: 'Incorrect API key provided.',
    type: 'invalid_request_error',
    code: 'invalid_api_key',
  },
  404: {
    message: 'The model does not exist.',
    type: 'invalid_request_error',
    code: 'model_not_found',
  },
  429: {
    message: 'Rate limit reached for requests.',
    type: 'requests',
    code: 'rate_limit_exceeded',
  },
  500: {
    message: 'The server had an error while processing your request. Sorry about that!',
    type: 'server_error',
    code: null,
  },
  503: { message: 'The engine is currently overloaded.', type: 'server_error', code: null },
};

const now = () => Math.floor(Date.now() / 1000);
const newId = (prefix: string) => `${prefix}-${randomBytes(12).toString('hex')}`;
const tokens = (text: string) => Math.max(1, Math.ceil(text.length / 4));

/** The default reply: valid for the service's schema, and telling requests apart. */
export function echoReply(request: RecordedChatRequest): Record<string, unknown> {
  const lastUser = [...(request.body?.messages ?? [])].reverse().find((m) => m.role === 'user');
  return { text: `echo: ${textOf(lastUser?.content)}`, emotion: 'joy', intensity: 0.6 };
}

function textOf(content: ChatMessage['content'] | undefined): string {
  if (typeof content === 'string') return content;
  return (content ?? []).map((part) => part.text ?? '').join('');
}

/**
 * How `/v1/moderations` answers an input: the categories OpenAI flags (`self-harm/intent`,
 * `sexual/minors`, `violence`, …), or a fault.
 */
export type FakeModeration =
  { flagged: string[] } | { hang: true } | { error: number } | { garbage: string };

export class FakeOpenAI {
  readonly requests: RecordedChatRequest[] = [];
  /** Requests to /v1/moderations, kept apart from the chat requests. */
  readonly moderations: RecordedChatRequest[] = [];
  /** Decides each moderation; default: nothing flagged. */
  moderate: (input: string) => FakeModeration = () => ({ flagged: [] });
  /** Requests whose client went away before the reply was complete. */
  aborted = 0;
  private queue: FakeReply[] = [];
  private standing: FakeReply | ((request: RecordedChatRequest) => FakeReply) | undefined;
  private readonly open = new Set<ServerResponse>();
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly events = new EventEmitter();

  private constructor(
    private readonly server: Server,
    private readonly options: FakeOpenAIOptions,
  ) {}

  static async start(options: FakeOpenAIOptions = {}): Promise<FakeOpenAI> {
    const server = createServer();
    const fake = new FakeOpenAI(server, options);
    server.on('request', (request, response) => fake.onRequest(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  /** The base URL for the SDK (OPENAI_BASE_URL), with the `/v1` prefix. */
  get url(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}/v1`;
  }

  /** The next requests get these replies, one each, in order; then the standing reply. */
  respondWith(...replies: FakeReply[]): void {
    this.queue.push(...replies);
  }

  /**
   * Every request after the queue gets this reply, until `reset`; a function picks one per
   * request (e.g. failing a share of calls at random, for a benchmark).
   */
  respondAlwaysWith(reply: FakeReply | ((request: RecordedChatRequest) => FakeReply)): void {
    this.standing = reply;
  }

  lastRequest(): RecordedChatRequest {
    const last = this.requests.at(-1);
    if (!last) throw new Error('The fake OpenAI server has received no request');
    return last;
  }

  /** Resolves once `count` requests in all have arrived (rejects after `timeoutMs`). */
  waitForRequests(count: number, timeoutMs = 5000): Promise<void> {
    return this.waitFor(() => this.requests.length >= count, `${count} request(s)`, timeoutMs);
  }

  /** Resolves once `count` requests in all were given up by their client. */
  waitForAborted(count = 1, timeoutMs = 5000): Promise<void> {
    return this.waitFor(() => this.aborted >= count, `${count} aborted request(s)`, timeoutMs);
  }

  /** Forgets the requests, the script and the counts; ends replies still open. */
  reset(): void {
    this.requests.length = 0;
    this.moderations.length = 0;
    this.moderate = () => ({ flagged: [] });
    this.queue = [];
    this.standing = undefined;
    this.endOpenReplies();
    this.aborted = 0;
  }

  async close(): Promise<void> {
    this.endOpenReplies();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private endOpenReplies(): void {
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    for (const response of this.open) {
      // Not the client's doing: ended here, so not counted as aborted.
      this.open.delete(response);
      response.destroy();
    }
  }

  private waitFor(done: () => boolean, what: string, timeoutMs: number): Promise<void> {
    if (done()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!done()) return;
        clearTimeout(timer);
        this.events.off('change', check);
        resolve();
      };
      const timer = setTimeout(() => {
        this.events.off('change', check);
        reject(new Error(`Timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.events.on('change', check);
    });
  }

  private later(ms: number, action: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      action();
    }, ms);
    this.timers.add(timer);
  }

  private onRequest(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const retryHeader = request.headers['x-stainless-retry-count'];
      const recorded: RecordedChatRequest = {
        method: request.method ?? 'GET',
        path: new URL(request.url ?? '/', 'http://fake').pathname,
        headers: request.headers,
        authorization: request.headers.authorization,
        retryCount: typeof retryHeader === 'string' ? Number(retryHeader) : undefined,
        rawBody,
        body: parseJson(rawBody),
        aborted: false,
      };
      const moderation = /^(\/v1)?\/moderations$/.test(recorded.path);
      (moderation ? this.moderations : this.requests).push(recorded);
      this.open.add(response);
      response.on('close', () => {
        if (!this.open.delete(response)) return;
        if (!response.writableFinished) {
          recorded.aborted = true;
          this.aborted++;
        }
        this.events.emit('change');
      });
      this.events.emit('change');
      if (moderation) this.answerModeration(recorded, response);
      else this.route(recorded, response);
    });
  }

  /**
   * OpenAI's moderation answer for the request's `input`, a string or an array of them: one
   * result per input, as `moderate` decides each; the first fault decided answers for all.
   */
  private answerModeration(recorded: RecordedChatRequest, response: ServerResponse): void {
    const input = (recorded.body as { input?: unknown } | undefined)?.input;
    const inputs = Array.isArray(input) ? input : [input];
    const decisions = inputs.map((each) =>
      this.moderate(typeof each === 'string' ? each : JSON.stringify(each)),
    );
    const fault = decisions.find((decision) => !('flagged' in decision));
    if (fault && 'hang' in fault) return;
    if (fault && 'error' in fault) return this.sendError(response, { status: fault.error });
    if (fault && 'garbage' in fault) {
      response.writeHead(200, { 'content-type': 'application/json' }).end(fault.garbage);
      return;
    }
    const results = decisions.map((decision) => {
      const flagged = 'flagged' in decision ? decision.flagged : [];
      const categories = Object.fromEntries(
        [
          'harassment',
          'hate',
          'illicit',
          'illicit/violent',
          'self-harm',
          'self-harm/intent',
          'self-harm/instructions',
          'sexual',
          'sexual/minors',
          'violence',
          'violence/graphic',
        ].map((name) => [name, flagged.includes(name)]),
      );
      return {
        flagged: flagged.length > 0,
        categories,
        category_scores: Object.fromEntries(
          Object.entries(categories).map(([name, on]) => [name, on ? 0.99 : 0.001]),
        ),
      };
    });
    response.writeHead(200, { 'content-type': 'application/json' }).end(
      JSON.stringify({
        id: 'modr-fake',
        model: (recorded.body as { model?: string } | undefined)?.model ?? 'omni-moderation-latest',
        results,
      }),
    );
  }

  private route(recorded: RecordedChatRequest, response: ServerResponse): void {
    const { apiKey } = this.options;
    if (recorded.method !== 'POST' || !/^(\/v1)?\/chat\/completions$/.test(recorded.path)) {
      return this.sendError(response, {
        status: 404,
        message: `Unknown request URL: ${recorded.method} ${recorded.path}.`,
        type: 'invalid_request_error',
        code: 'unknown_url',
      });
    }
    if (apiKey !== undefined && recorded.authorization !== `Bearer ${apiKey}`) {
      return this.sendError(response, { status: 401 });
    }
    if (!recorded.body || !Array.isArray(recorded.body.messages)) {
      return this.sendError(response, {
        status: 400,
        message: "Missing required parameter: 'messages'.",
        code: 'missing_required_parameter',
      });
    }
    const standing = typeof this.standing === 'function' ? this.standing(recorded) : this.standing;
    const reply = this.queue.shift() ?? standing ?? triggeredToolCalls(recorded) ?? {};
    if (reply.hang) return;
    const answer = () => {
      if (response.destroyed) return;
      if (reply.reset) {
        this.open.delete(response);
        response.socket?.destroy();
        return;
      }
      if (reply.error) return this.sendError(response, reply.error);
      if (reply.raw) {
        response.writeHead(reply.raw.status ?? 200, {
          'Content-Type': reply.raw.contentType ?? 'application/json',
        });
        response.end(reply.raw.body);
        return;
      }
      if (reply.hangAfterHeaders) {
        response.writeHead(200, {
          'Content-Type': recorded.body?.stream ? 'text/event-stream' : 'application/json',
        });
        response.flushHeaders();
        return;
      }
      if (recorded.body?.stream) this.sendStream(recorded, reply, response);
      else this.sendCompletion(recorded, reply, response);
    };
    if (reply.delayMs) this.later(reply.delayMs, answer);
    else answer();
  }

  private sendCompletion(
    recorded: RecordedChatRequest,
    reply: FakeReply,
    response: ServerResponse,
  ): void {
    const { content } = contentOf(recorded, reply);
    const refused = reply.refusal !== undefined;
    const calls = reply.toolCalls?.map(({ id, name, arguments: args }) => ({
      id,
      type: 'function',
      function: { name, arguments: args },
    }));
    const body = {
      id: newId('chatcmpl'),
      object: 'chat.completion',
      created: now(),
      model: recorded.body?.model ?? 'gpt-fake',
      choices: [
        {
          index: 0,
          message: calls
            ? {
                role: 'assistant',
                content: reply.content === undefined ? null : content,
                refusal: null,
                tool_calls: calls,
              }
            : refused
              ? { role: 'assistant', content: null, refusal: reply.refusal }
              : // A content filter's stop, as Azure OpenAI answers it: no text at all.
                {
                  role: 'assistant',
                  content: reply.finishReason === 'content_filter' ? null : content,
                  refusal: null,
                },
          logprobs: null,
          finish_reason: calls ? 'tool_calls' : (reply.finishReason ?? 'stop'),
        },
      ],
      ...(reply.usage === null ? {} : { usage: usageOf(recorded, reply, content) }),
    };
    response.writeHead(200, { 'Content-Type': 'application/json', 'x-request-id': newId('req') });
    response.end(JSON.stringify(body));
  }

  private sendStream(recorded: RecordedChatRequest, reply: FakeReply, response: ServerResponse) {
    const options = reply.stream ?? {};
    const refused = reply.refusal !== undefined;
    const { content, pieces = split(content, options.chunks, options.chunkSize ?? 8) } = refused
      ? { content: reply.refusal! }
      : contentOf(recorded, reply);
    const includeUsage =
      recorded.body?.stream_options?.include_usage === true && reply.usage !== null;
    const base = {
      id: newId('chatcmpl'),
      object: 'chat.completion.chunk',
      created: now(),
      model: recorded.body?.model ?? 'gpt-fake',
    };
    const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) =>
      `data: ${JSON.stringify({ ...base, choices, ...(includeUsage ? { usage: null } : {}), ...extra })}\n\n`;
    const delta = (fields: Record<string, unknown>, finish: string | null = null) =>
      chunk([{ index: 0, delta: fields, logprobs: null, finish_reason: finish }]);

    response.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-cache',
      Connection: 'keep-alive',
      'x-request-id': newId('req'),
    });
    response.write(delta({ role: 'assistant', content: '', refusal: null }));

    if (reply.toolCalls) {
      if (reply.content !== undefined)
        pieces.forEach((piece) => response.write(delta({ content: piece })));
      reply.toolCalls.forEach(({ id, name, arguments: args }, index) => {
        const call = (fields: Record<string, unknown>) =>
          delta({ tool_calls: [{ index, ...fields }] });
        response.write(call({ id, type: 'function', function: { name, arguments: '' } }));
        const half = Math.ceil(args.length / 2);
        response.write(call({ function: { arguments: args.slice(0, half) } }));
        response.write(call({ function: { arguments: args.slice(half) } }));
      });
      response.write(delta({}, 'tool_calls'));
      if (includeUsage) response.write(chunk([], { usage: usageOf(recorded, reply, content) }));
      response.end('data: [DONE]\n\n');
      return;
    }

    let sent = 0;
    const next = () => {
      if (response.destroyed) return;
      if (sent === options.stallAfter) return;
      if (sent === options.dropAfter) {
        this.open.delete(response);
        response.destroy();
        return;
      }
      if (sent === options.errorAfter) {
        const error = { ...ERROR_DEFAULTS[500], param: null };
        response.end(`data: ${JSON.stringify({ error })}\n\n`);
        return;
      }
      if (sent < pieces.length) {
        if (sent === 0) recorded.firstContentAt = performance.now();
        response.write(delta(refused ? { refusal: pieces[sent++] } : { content: pieces[sent++] }));
        if (options.intervalMs) this.later(options.intervalMs, next);
        else next();
        return;
      }
      response.write(delta({}, reply.finishReason ?? 'stop'));
      if (includeUsage) response.write(chunk([], { usage: usageOf(recorded, reply, content) }));
      response.end('data: [DONE]\n\n');
    };
    next();
  }

  private sendError(response: ServerResponse, error: FakeError): void {
    const defaults = ERROR_DEFAULTS[error.status] ?? ERROR_DEFAULTS[500];
    const headers: Record<string, string> = {
      'Content-Type': 'application/json',
      'x-request-id': newId('req'),
    };
    const retryAfterMs =
      error.retryAfterMs === undefined
        ? error.retryAfter === undefined
          ? 0
          : null
        : error.retryAfterMs;
    if (retryAfterMs !== null) headers['retry-after-ms'] = String(retryAfterMs);
    if (error.retryAfter !== undefined) headers['retry-after'] = error.retryAfter;
    response.writeHead(error.status, headers);
    response.end(
      JSON.stringify({
        error: {
          message: error.message ?? defaults.message,
          type: error.type ?? defaults.type,
          param: null,
          code: error.code === undefined ? defaults.code : error.code,
        },
      }),
    );
  }
}

/** The default reply's tool calls: the local engine's `T({...})` trigger, on the user's turn. */
function triggeredToolCalls(recorded: RecordedChatRequest): FakeReply | undefined {
  const tools = recorded.body?.tools;
  const last = recorded.body?.messages?.at(-1);
  if (!Array.isArray(tools) || last?.role !== 'user') return undefined;
  const names = tools.map((tool: { function?: { name?: string } }) => tool.function?.name ?? '');
  const calls = triggeredCalls(textOf(last.content), names);
  if (calls.length === 0) return undefined;
  return {
    toolCalls: calls.map((call, index) => ({
      id: `call_fake_${index}`,
      name: call.name,
      arguments: JSON.stringify(call.arguments),
    })),
  };
}

function parseJson(raw: string): ChatCompletionBody | undefined {
  try {
    const parsed: unknown = JSON.parse(raw);
    return parsed && typeof parsed === 'object' ? (parsed as ChatCompletionBody) : undefined;
  } catch {
    return undefined;
  }
}

/** The reply's content, and its streamed pieces when the script gave them. */
function contentOf(
  recorded: RecordedChatRequest,
  reply: FakeReply,
): { content: string; pieces?: string[] } {
  const content =
    typeof reply.content === 'function'
      ? reply.content(recorded)
      : (reply.content ?? echoReply(recorded));
  if (typeof content === 'string') return { content };
  if (Array.isArray(content)) return { content: content.join(''), pieces: content };
  return { content: JSON.stringify(content) };
}

function usageOf(recorded: RecordedChatRequest, reply: FakeReply, content: string) {
  const prompt = (recorded.body?.messages ?? []).map((m) => textOf(m.content)).join('\n');
  const { prompt_tokens, completion_tokens, cached_tokens } = reply.usage ?? {
    prompt_tokens: tokens(prompt),
    completion_tokens: tokens(content),
  };
  return {
    prompt_tokens,
    completion_tokens,
    total_tokens: prompt_tokens + completion_tokens,
    ...(cached_tokens === undefined ? {} : { prompt_tokens_details: { cached_tokens } }),
  };
}

/** `count` nearly equal pieces when given, else pieces of `size` characters. */
function split(content: string, count: number | undefined, size: number): string[] {
  if (count !== undefined) {
    return Array.from({ length: count }, (_, i) =>
      content.slice(
        Math.floor((i * content.length) / count),
        Math.floor(((i + 1) * content.length) / count),
      ),
    );
  }
  const pieces: string[] = [];
  for (let at = 0; at < content.length; at += size) pieces.push(content.slice(at, at + size));
  return pieces.length > 0 ? pieces : [''];
}

/**
 * The environment of an app whose replies come from `fake` as the model `model-a`, with a
 * breaker that does not open: for specs that count replies, tokens or spend, not failures.
 */
export function fakeModelEnv(fake: FakeOpenAI): Record<string, string> {
  return {
    RESPONSE_ENGINE: 'openai',
    OPENAI_BASE_URL: fake.url,
    OPENAI_API_KEY: 'sk-provider-key',
    OPENAI_MODEL: 'model-a',
    ENGINE_BREAKER_FAILURES: '1000',
  };
}

/**
 * One `data:` line of a chat completion stream, choice 0 carrying `delta` (and `finish`): for a
 * spec's `raw` answer that the fake's own streams would never send.
 */
export function completionChunk(delta: unknown, finish: string | null = null): string {
  return `data: ${JSON.stringify({
    id: 'chatcmpl-raw',
    object: 'chat.completion.chunk',
    created: 0,
    model: 'default-model',
    choices: [{ index: 0, delta, finish_reason: finish }],
  })}\n\n`;
}
