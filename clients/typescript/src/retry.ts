/** What openapi-fetch calls to send a request, and what the constructor's `fetch` option is. */
export type Fetch = (request: Request) => Promise<Response>;

export const IDEMPOTENCY_KEY = 'Idempotency-Key';

/** Answers worth another try: rate limited, or a gateway or the service briefly unavailable. */
const RETRIED_STATUSES = new Set([429, 502, 503, 504]);
/** A longer `Retry-After` is not waited for: the answer goes back to the caller to decide. */
const MAX_RETRY_AFTER_MS = 60_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

/**
 * A fetch that sends one logical request, retrying it up to `maxRetries` times on a network error
 * or a 429, 502, 503 or 504. A POST without an `Idempotency-Key` gets a fresh one, which every
 * retry repeats, so the service runs it at most once (contract §16). Waits honour `Retry-After`
 * (plus up to a second of jitter, so clients told the same time do not return together), else
 * back off exponentially with jitter; an aborted signal ends the wait and the request at once.
 */
export function retryingFetch(maxRetries: number, send: Fetch): Fetch {
  return async (request) => {
    const key =
      request.method === 'POST' && !request.headers.has(IDEMPOTENCY_KEY)
        ? crypto.randomUUID()
        : undefined;
    // A body is read once, so that every attempt can send it again.
    const body = request.body === null ? null : await request.arrayBuffer();
    let attempt = () => request;
    if (body !== null || key !== undefined) {
      const headers = new Headers(request.headers);
      if (key !== undefined) headers.set(IDEMPOTENCY_KEY, key);
      attempt = () => new Request(request, { body, headers });
    }

    for (let retry = 0; ; retry++) {
      let response: Response;
      try {
        response = await send(attempt());
      } catch (error) {
        if (request.signal.aborted || retry >= maxRetries) throw error;
        await sleep(backoff(retry), request.signal);
        continue;
      }
      const wait = retry < maxRetries ? retryDelay(response, retry) : undefined;
      if (wait === undefined) return response;
      await response.body?.cancel();
      await sleep(wait, request.signal);
    }
  };
}

function retryDelay(response: Response, retry: number): number | undefined {
  if (!RETRIED_STATUSES.has(response.status)) return undefined;
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
  if (retryAfter === undefined) return backoff(retry);
  if (retryAfter > MAX_RETRY_AFTER_MS) return undefined;
  return retryAfter + Math.random() * Math.min(retryAfter / 5, 1_000);
}

/** `Retry-After` in milliseconds: whole seconds or an HTTP date; undefined when absent or bad. */
function parseRetryAfter(value: string | null): number | undefined {
  if (value === null || value.trim() === '') return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1_000);
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - Date.now());
}

/** 0.5 s, 1 s, 2 s… up to 8 s, each between half and all of it. */
function backoff(retry: number): number {
  const ceiling = Math.min(BACKOFF_BASE_MS * 2 ** retry, BACKOFF_MAX_MS);
  return ceiling / 2 + (Math.random() * ceiling) / 2;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason as Error);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
