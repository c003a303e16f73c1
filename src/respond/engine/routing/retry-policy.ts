import { APIConnectionError, APIError } from 'openai';
import type { TokenUsage } from '../response-engine';

/** The longest a provider's Retry-After is waited; longer ones are cut to this (§21). */
export const RETRY_AFTER_CAP_MS = 2_000;
/** The first retry's backoff when the provider names no wait; doubled for each later retry. */
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 2_000;

/**
 * An answer that arrived whole and holds no reply: a refusal, an empty text, a body that is no
 * completion, one past ENGINE_MAX_TOKENS. What a model says is the request's doing (a message it
 * refuses, a system prompt asking for silence): the next route is tried for this request, and no
 * breaker counts it (§29).
 */
export class UnusableAnswer extends Error {
  /**
   * `spent`: what the call cost (reported, or estimated), when the provider answered a
   * completion; `pastTheCap`: it wrote on past ENGINE_MAX_TOKENS (cut off at the read bound).
   */
  constructor(
    message: string,
    readonly spent?: TokenUsage,
    readonly pastTheCap = false,
  ) {
    super(message);
    this.name = 'UnusableAnswer';
  }
}

/**
 * A stream that ended before its finish reason: the connection dropped (or the server closed
 * it) mid-answer. No text a model writes ends an SSE stream early, so this is the transport's
 * failure: retried, and counted against the route.
 */
export class CutOffAnswer extends Error {
  constructor() {
    super('The model provider broke off its answer');
    this.name = 'CutOffAnswer';
  }
}

/** What one failed attempt means for the next. */
export interface Failure {
  /** `retry`: the same route again (up to ENGINE_RETRIES), then the next; `next`: the next route. */
  kind: 'retry' | 'next';
  /**
   * Counts toward the route's circuit breaker (§29): only what says the provider or the way to
   * it failed, a connection error, a stream cut off, HTTP 408, 429 or 5xx (a timeout is counted
   * by the router). Everything else is about this request (a 400 for a conversation too long, a
   * refusal, an answer that does not parse): counted, five users' requests would pause the
   * route for everyone.
   */
  countsAgainstRoute: boolean;
  /** The provider's Retry-After, capped at RETRY_AFTER_CAP_MS; null when it named none. */
  retryAfterMs: number | null;
  /** For the 502's message: never the provider's own words, which may quote the prompt. */
  description: string;
}

const NOT_A_REPLY = 'The model provider answered with something that is not a reply';
const UNREACHABLE = 'The model provider could not be reached or broke off its answer';

/** Classifies an attempt's error (not an abort: the caller checks its signal first). */
export function classifyFailure(error: unknown, nowMs: number): Failure {
  if (error instanceof UnusableAnswer) return notCounted('next', error.message);
  if (error instanceof CutOffAnswer) return counted(error.message);
  // Before APIError, of which it is a subclass (without a status).
  if (error instanceof APIConnectionError || isTransportError(error)) return counted(UNREACHABLE);
  if (error instanceof APIError) {
    const status: unknown = error.status;
    // No status: an `{"error": …}` event inside a 200 stream, the provider's word about this
    // answer. Tried again, but no proof that the route is down.
    if (typeof status !== 'number') {
      return notCounted('retry', 'The model provider reported an error in its answer');
    }
    const description = `The model provider failed (HTTP ${status})`;
    const providerFailed = status === 408 || status === 429 || status >= 500;
    const transient = providerFailed || status === 409;
    return {
      kind: transient ? 'retry' : 'next',
      countsAgainstRoute: providerFailed,
      retryAfterMs: transient ? retryAfterMs(error.headers as Headers | undefined, nowMs) : null,
      description,
    };
  }
  // A SyntaxError is the SDK parsing a body that claims to be JSON (or an SSE event) and is not;
  // anything else is an answer our reading of it did not expect. Either way it arrived.
  return notCounted('next', NOT_A_REPLY);
}

function counted(description: string): Failure {
  return { kind: 'retry', countsAgainstRoute: true, retryAfterMs: null, description };
}

function notCounted(kind: Failure['kind'], description: string): Failure {
  return { kind, countsAgainstRoute: false, retryAfterMs: null, description };
}

/** Error codes of a connection that failed or dropped (Node's sockets and DNS, undici's). */
const TRANSPORT_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'EAI_AGAIN',
  'ENOTFOUND',
  'UND_ERR_SOCKET',
  'UND_ERR_CLOSED',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
]);

/**
 * The connection failed or dropped under the answer: undici's `TypeError: terminated` when a body
 * is cut off, or an error (or one of its causes) with a socket's error code.
 */
function isTransportError(error: unknown): boolean {
  for (let cause = error, depth = 0; cause instanceof Error && depth < 5; depth++) {
    if (cause.name === 'TypeError' && cause.message === 'terminated') return true;
    const code = (cause as { code?: unknown }).code;
    if (typeof code === 'string' && TRANSPORT_CODES.has(code)) return true;
    cause = cause.cause;
  }
  return false;
}

/**
 * The wait a provider asks for: `retry-after-ms` (OpenAI's, in milliseconds), else `retry-after`
 * in seconds or as an HTTP date; at most RETRY_AFTER_CAP_MS. Null when absent or unreadable.
 */
export function retryAfterMs(headers: Headers | undefined, nowMs: number): number | null {
  if (!headers) return null;
  let ms = Number.NaN;
  const inMs = headers.get('retry-after-ms');
  if (inMs !== null && inMs.trim() !== '') ms = Number(inMs);
  const after = headers.get('retry-after');
  if (Number.isNaN(ms) && after !== null && after.trim() !== '') {
    ms = /^\s*\d+(\.\d+)?\s*$/.test(after) ? Number(after) * 1000 : Date.parse(after) - nowMs;
  }
  if (!Number.isFinite(ms)) return null;
  return Math.min(RETRY_AFTER_CAP_MS, Math.max(0, Math.ceil(ms)));
}

/**
 * The wait before retry number `retry` (1, 2, …) when the provider named none: 250 ms doubled
 * per retry, at most 2 s, less up to half of it at random, so that instances which failed
 * together do not retry together.
 */
export function backoffMs(retry: number, random: () => number = Math.random): number {
  const base = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** Math.max(0, retry - 1));
  return Math.round(base * (1 - random() / 2));
}
