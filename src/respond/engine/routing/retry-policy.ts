import { APIError } from 'openai';

/** The longest a provider's Retry-After is waited; longer ones are cut to this (§21). */
export const RETRY_AFTER_CAP_MS = 2_000;
/** The first retry's backoff when the provider names no wait; doubled for each later retry. */
const BACKOFF_BASE_MS = 250;
const BACKOFF_CAP_MS = 2_000;

/**
 * An answer the provider gave that is no reply: a stream cut off before its finish reason
 * (`retryable`: a connection that dropped), or a body that holds no usable reply (not retried on
 * the same route: a provider answering 200 with garbage answers it again).
 */
export class UnusableAnswer extends Error {
  constructor(
    message: string,
    readonly retryable: boolean,
  ) {
    super(message);
    this.name = 'UnusableAnswer';
  }
}

/** What one failed attempt means for the next. */
export interface Failure {
  /** `retry`: the same route again (up to ENGINE_RETRIES), then the next; `next`: the next route. */
  kind: 'retry' | 'next';
  /**
   * Counts toward the route's circuit breaker. A 400, 413 or 422 is about this request (a
   * conversation too long for the model's context, say), not the route: it moves on to the next
   * route, but five users with long conversations must not open the breaker for everyone.
   */
  countsAgainstRoute: boolean;
  /** The provider's Retry-After, capped at RETRY_AFTER_CAP_MS; null when it named none. */
  retryAfterMs: number | null;
  /** For the 502's message: never the provider's own words, which may quote the prompt. */
  description: string;
}

const REQUEST_FAULTS = new Set([400, 413, 422]);

/** Classifies an attempt's error (not an abort: the caller checks its signal first). */
export function classifyFailure(error: unknown, nowMs: number): Failure {
  if (error instanceof UnusableAnswer) {
    return {
      kind: error.retryable ? 'retry' : 'next',
      countsAgainstRoute: true,
      retryAfterMs: null,
      description: error.message,
    };
  }
  if (error instanceof APIError && typeof error.status === 'number') {
    const status = error.status;
    const transient = status === 408 || status === 409 || status === 429 || status >= 500;
    return {
      kind: transient ? 'retry' : 'next',
      countsAgainstRoute: !REQUEST_FAULTS.has(status),
      retryAfterMs: transient ? retryAfterMs(error.headers as Headers | undefined, nowMs) : null,
      description: `The model provider failed (HTTP ${status})`,
    };
  }
  if ((error as { name?: unknown } | null)?.name === 'SyntaxError') {
    // The SDK parsing a body that claims to be JSON (or an SSE event) and is not. By name: the
    // error may come from fetch's realm, whose SyntaxError is another class.
    return {
      kind: 'next',
      countsAgainstRoute: true,
      retryAfterMs: null,
      description: 'The model provider answered with something that is not a reply',
    };
  }
  // Connection refused or reset, a body cut off (undici's "terminated"), an error event in the
  // stream (an APIError without a status): the provider or the way to it hiccuped.
  return {
    kind: 'retry',
    countsAgainstRoute: true,
    retryAfterMs: null,
    description: 'The model provider could not be reached or broke off its answer',
  };
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
