import createClient, { type Client } from 'openapi-fetch';
import { isEnvelope, PersonalityApiError } from './errors';
import { readText, serverSentEvents } from './event-stream';
import type { components, paths } from './generated/openapi';
import { IDEMPOTENCY_KEY, retryingFetch, type Fetch } from './retry';

type Schemas = components['schemas'];

/** The body of `POST /v1/respond`; `respond` and `respondStream` choose `stream` themselves. */
export type RespondBody = Omit<Schemas['RespondDto'], 'stream'>;
/**
 * The answer of `POST /v1/respond` (and of a turn's tool outputs), also the `done` event of a
 * stream: the reply (`status: "completed"`), or a pause for client tools (`"requires_action"`,
 * resumed by `submitToolOutputs`; docs/tools.md).
 */
export type RespondAnswer = Schemas['RespondResponseDto'] | Schemas['RespondRequiresActionDto'];
/** A tool call the client is to run. */
export type ToolCall = Schemas['ToolCallDto'];
/** The outputs that resume a paused turn, one for every call it asked for. */
export type ToolOutput = Schemas['ToolOutputDto'];
/**
 * What `respondStream` yields: pieces of the reply, the client tools a paused turn waits for,
 * then the whole answer, or an error.
 */
export type RespondStreamEvent =
  | { type: 'delta'; text: string }
  | { type: 'tool_calls'; turnId: string; toolCalls: ToolCall[] }
  | { type: 'done'; answer: RespondAnswer }
  | { type: 'error'; error: PersonalityApiError };

export type PersonalityApiOptions = {
  /** Where the API is, e.g. `https://api.example.com` (paths start with `/v1`). */
  baseUrl: string;
  /** Retries of a request after a network error, 429, 502, 503 or 504 (default 2; 0: none). */
  maxRetries?: number;
  /** The fetch every attempt goes through (default: the global `fetch`). */
  fetch?: Fetch;
  /** Further headers sent with every request. */
  headers?: Record<string, string>;
} & (
  | { apiKey: string; accessToken?: never; organizationId?: never }
  /** An access token acts for a user; `organizationId` picks one of their organizations. */
  | { accessToken: string; organizationId?: string; apiKey?: never }
  /** No credential: the public operations (sign-up, login, vocabularies). */
  | { apiKey?: never; accessToken?: never; organizationId?: never }
);

export interface CallOptions {
  /** Sent as `Idempotency-Key`; default: a fresh UUID for this call, repeated by its retries. */
  idempotencyKey?: string;
  signal?: AbortSignal;
}

type Get<P> = P extends keyof paths ? (paths[P] extends { get: infer O } ? O : never) : never;
/** Only the JSON answers: the SSE of a streamed respond is `respondStream`'s. */
type Json = 'application/json';
type JsonOk<O> = O extends { responses: { 200: { content: { 'application/json': infer B } } } }
  ? B
  : never;
/** The paths whose GET answers a page: `{data: [...], has_more}`. */
export type ListPath = {
  [P in keyof paths]: [Get<P>] extends [never]
    ? never
    : // A GET answering no JSON (the PMF schema's application/schema+json) is no list.
      [JsonOk<Get<P>>] extends [never]
      ? never
      : JsonOk<Get<P>> extends { data: unknown[]; has_more: boolean }
        ? P
        : never;
}[keyof paths];
/** An item of the list at `P`. */
export type ListItem<P extends ListPath> =
  JsonOk<Get<P>> extends { data: Array<infer Item> } ? Item : never;
type ParamsOf<P> =
  Get<P> extends { parameters: infer Q extends { path?: unknown; query?: unknown } } ? Q : never;
/** `paginate`'s second argument: the list's path and query parameters, and a signal. */
export type PageParams<P extends ListPath> = Pick<ParamsOf<P>, 'path' | 'query'> & {
  signal?: AbortSignal;
};
type PageArgs<P extends ListPath> = undefined extends ParamsOf<P>['path']
  ? [params?: PageParams<P>]
  : [params: PageParams<P>];

/**
 * The field of the last item that `starting_after` names, for lists whose items have no `id`
 * or whose cursor is another field (docs/api.md, Conventions). A new list whose items have no
 * `id` does not compile until it is named here.
 */
type PathsWithoutId = {
  [P in ListPath]: 'id' extends keyof ListItem<P> ? never : P;
}[ListPath];
const CURSORS: { [P in PathsWithoutId]: keyof ListItem<P> } & {
  [P in ListPath]?: keyof ListItem<P>;
} = {
  '/v1/end-users': 'user_id',
  // A search answers one page (has_more is always false): its cursor is never sent.
  '/v1/knowledge/search': 'document_id',
  '/v1/organizations/{id}/members': 'user_id',
  '/v1/personalities/catalog': 'slug',
  '/v1/usage/breakdown': 'key',
  '/v1/vocabularies/emotions/changelog': 'version',
};

type Page = { data: Array<Record<string, unknown>>; has_more: boolean };

/**
 * The Personality API. Every operation is a typed call, as openapi-fetch has it:
 * `await api.GET('/v1/end-users/{user_id}', {params: {path: {user_id}}})` answers
 * `{data, error, response}`. `respond`, `respondStream` and `paginate` throw PersonalityApiError
 * instead. Every POST carries an Idempotency-Key; failed attempts are retried (see `maxRetries`).
 */
export class PersonalityApi {
  readonly GET: Client<paths, Json>['GET'];
  readonly POST: Client<paths, Json>['POST'];
  readonly PUT: Client<paths, Json>['PUT'];
  readonly PATCH: Client<paths, Json>['PATCH'];
  readonly DELETE: Client<paths, Json>['DELETE'];

  constructor(options: PersonalityApiOptions) {
    const credential = options.apiKey ?? options.accessToken;
    const client = createClient<paths, Json>({
      baseUrl: options.baseUrl,
      fetch: retryingFetch(options.maxRetries ?? 2, options.fetch ?? ((request) => fetch(request))),
      headers: {
        ...options.headers,
        ...(credential !== undefined && { Authorization: `Bearer ${credential}` }),
        ...(options.organizationId !== undefined && {
          'X-Organization-Id': options.organizationId,
        }),
      },
    });
    this.GET = client.GET;
    this.POST = client.POST;
    this.PUT = client.PUT;
    this.PATCH = client.PATCH;
    this.DELETE = client.DELETE;
  }

  /** A personality answers an end user (`POST /v1/respond`). */
  async respond(body: RespondBody, options: CallOptions = {}): Promise<RespondAnswer> {
    const { data, error, response } = await this.POST('/v1/respond', {
      body,
      headers: keyHeader(options),
      signal: options.signal,
    });
    if (data === undefined) throw PersonalityApiError.from(error, response);
    return data;
  }

  /**
   * Resumes a turn paused for client tools (`POST /v1/respond/turns/{turn_id}/tool-outputs`):
   * the reply, or a further pause.
   */
  async submitToolOutputs(
    turnId: string,
    outputs: ToolOutput[],
    options: CallOptions = {},
  ): Promise<RespondAnswer> {
    const { data, error, response } = await this.POST('/v1/respond/turns/{turn_id}/tool-outputs', {
      params: { path: { turn_id: turnId } },
      body: { outputs },
      headers: keyHeader(options),
      signal: options.signal,
    });
    if (data === undefined) throw PersonalityApiError.from(error, response);
    return data;
  }

  /**
   * The reply as it is written (`"stream": true`): `delta` events, then `done` with the answer,
   * or an `error` event when the reply failed after it started. An error before it started
   * throws, and so does a stream that is not what the service writes (`invalid_stream_event`:
   * an event that does not parse or lacks its fields, or one over 1 MiB; `incomplete_stream`: it
   * ended without `done` or `error`). Leaving the loop early closes the connection, which
   * cancels the reply.
   */
  async *respondStream(
    body: RespondBody,
    options: CallOptions = {},
  ): AsyncGenerator<RespondStreamEvent, void, undefined> {
    const { data, error, response } = await this.POST('/v1/respond', {
      body: { ...body, stream: true },
      headers: { accept: 'text/event-stream', ...keyHeader(options) },
      parseAs: 'stream',
      signal: options.signal,
    });
    if (!data) throw PersonalityApiError.from(error, response);
    const invalid = (message: string) => streamError(response, 'invalid_stream_event', message);
    // A repeated Idempotency-Key replays the stored answer as JSON (contract §16).
    if (!response.headers.get('content-type')?.startsWith('text/event-stream')) {
      const replayed = toStreamEvent('done', await readText(data, invalid), response);
      if (replayed) yield replayed;
      return;
    }
    const events = serverSentEvents(data, invalid).getReader();
    try {
      for (;;) {
        const { done, value } = await events.read();
        if (done) {
          throw streamError(
            response,
            'incomplete_stream',
            'The reply stream ended before its done or error event',
          );
        }
        const event = toStreamEvent(value.event, value.data, response);
        if (event === undefined) continue;
        yield event;
        if (event.type === 'done' || event.type === 'error') return;
      }
    } finally {
      await events.cancel().catch(() => undefined);
    }
  }

  /**
   * Every item of a list, page after page (`starting_after` = the last item's cursor), e.g.
   * `for await (const user of api.paginate('/v1/end-users', {query: {limit: 100}}))`.
   */
  async *paginate<P extends ListPath>(
    path: P,
    ...[params]: PageArgs<P>
  ): AsyncGenerator<ListItem<P>, void, undefined> {
    const get = this.GET as unknown as (
      path: string,
      init: object,
    ) => Promise<{ data?: Page; error?: unknown; response: Response }>;
    const field = (CURSORS as Record<string, string | undefined>)[path] ?? 'id';
    const given = (params ?? {}) as {
      path?: object;
      query?: Record<string, unknown>;
      signal?: AbortSignal;
    };
    let query = given.query;
    for (;;) {
      const { data, error, response } = await get(path, {
        params: { path: given.path, query },
        signal: given.signal,
      });
      if (data === undefined) throw PersonalityApiError.from(error, response);
      yield* data.data as Array<ListItem<P>>;
      const last = data.data.at(-1);
      if (!data.has_more || last === undefined) return;
      if (typeof last[field] !== 'string') throw new Error(`${path}: an item without ${field}`);
      query = { ...query, starting_after: last[field] };
    }
  }
}

/**
 * What an event of a reply's stream says; undefined for an event of another name (a later
 * version of the API may add some). A malformed one throws `invalid_stream_event`.
 */
function toStreamEvent(
  name: string | undefined,
  data: string,
  response: Response,
): RespondStreamEvent | undefined {
  if (name !== 'delta' && name !== 'tool_calls' && name !== 'done' && name !== 'error') {
    return undefined;
  }
  let payload: unknown;
  try {
    payload = JSON.parse(data);
  } catch {
    throw streamError(response, 'invalid_stream_event', `A ${name} event that is not JSON`);
  }
  if (name === 'delta' && isObject(payload) && typeof payload.text === 'string')
    return { type: 'delta', text: payload.text };
  if (
    name === 'tool_calls' &&
    isObject(payload) &&
    typeof payload.turn_id === 'string' &&
    Array.isArray(payload.tool_calls)
  ) {
    return {
      type: 'tool_calls',
      turnId: payload.turn_id,
      toolCalls: payload.tool_calls as ToolCall[],
    };
  }
  if (name === 'done' && isAnswer(payload)) return { type: 'done', answer: payload };
  if (name === 'error' && isEnvelope(payload))
    return { type: 'error', error: PersonalityApiError.from(payload, response) };
  throw streamError(response, 'invalid_stream_event', `A ${name} event without ${EXPECTED[name]}`);
}

const EXPECTED = {
  delta: 'a string text',
  tool_calls: 'a turn_id and tool_calls',
  done: 'an answer',
  error: 'the error envelope',
};

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Enough of an answer to be one: its reply and the reply's text, or a paused turn's calls. */
function isAnswer(value: unknown): value is RespondAnswer {
  if (!isObject(value)) return false;
  if (value.status === 'requires_action') {
    return typeof value.turn_id === 'string' && Array.isArray(value.tool_calls);
  }
  return isObject(value.reply) && typeof value.reply.text === 'string';
}

/**
 * A stream the client cannot read as the service writes it: its status and request id are the
 * response's (the service had answered 200 when the stream went wrong).
 */
function streamError(
  response: Response,
  code: 'invalid_stream_event' | 'incomplete_stream',
  message: string,
): PersonalityApiError {
  const requestId = response.headers.get('x-request-id');
  return new PersonalityApiError(
    { status: response.status, code, message, request_id: requestId ?? '' },
    requestId,
  );
}

function keyHeader(options: CallOptions): Record<string, string> {
  return options.idempotencyKey === undefined ? {} : { [IDEMPOTENCY_KEY]: options.idempotencyKey };
}
