/** What openapi-fetch calls to send a request, and what the constructor's `fetch` option is. */
export type Fetch = (request: Request) => Promise<Response>;

export const IDEMPOTENCY_KEY = 'Idempotency-Key';

/** Answers that did nothing, worth another try: rate limited, or the service briefly unavailable. */
const REFUSED_STATUSES = new Set([429, 503]);
/** A gateway's failure: the request may have been carried out. */
const UNKNOWN_OUTCOME_STATUSES = new Set([502, 504]);
/** A longer `Retry-After` is not waited for: the answer goes back to the caller to decide. */
const MAX_RETRY_AFTER_MS = 60_000;
const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 8_000;

/**
 * Whether sending `request` again after an unknown outcome (a network error, a 502 or 504) cannot
 * do its work twice: every request but a POST under /v1/auth/ (sign-up, login, password reset,
 * verification, SSO login), where the service checks an Idempotency-Key and ignores it, storing no
 * answer that holds credentials (docs/idempotency.md). A sign-up sent again after its answer was
 * lost answered 409 `email_taken`, and its access token was never seen (found by review).
 */
function safeToRepeat(request: Request): boolean {
  return !(request.method === 'POST' && /\/v1\/auth\//.test(new URL(request.url).pathname));
}

/**
 * A fetch that sends one logical request, retrying it up to `maxRetries` times on a 429 or 503,
 * on a network error, 502 or 504 unless it could then run twice (safeToRepeat), and on a 409
 * `idempotency_key_in_progress` (the same key's first attempt still running). A POST without an
 * `Idempotency-Key` gets a fresh one, which every retry repeats, so the service runs it at most
 * once (contract §16). Waits honour `Retry-After` (plus up to a second of jitter, so clients told
 * the same time do not return together), else back off exponentially with jitter; an aborted
 * signal ends the wait and the request at once.
 */
export function retryingFetch(maxRetries: number, send: Fetch): Fetch {
  return async (request) => {
    const key =
      request.method === 'POST' && !request.headers.has(IDEMPOTENCY_KEY)
        ? crypto.randomUUID()
        : undefined;
    const repeatable = safeToRepeat(request);
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
        if (!repeatable || request.signal.aborted || retry >= maxRetries) throw error;
        await sleep(backoff(retry), request.signal);
        continue;
      }
      const wait = retry < maxRetries ? await retryDelay(response, retry, repeatable) : undefined;
      if (wait === undefined) return response;
      await response.body?.cancel();
      await sleep(wait, request.signal);
    }
  };
}

async function retryDelay(
  response: Response,
  retry: number,
  repeatable: boolean,
): Promise<number | undefined> {
  if (response.status === 409) {
    return (await inProgress(response)) ? backoff(retry) : undefined;
  }
  if (!REFUSED_STATUSES.has(response.status)) {
    if (!repeatable || !UNKNOWN_OUTCOME_STATUSES.has(response.status)) return undefined;
  }
  const retryAfter = parseRetryAfter(response.headers.get('retry-after'));
  if (retryAfter === undefined) return backoff(retry);
  if (retryAfter > MAX_RETRY_AFTER_MS) return undefined;
  return retryAfter + Math.random() * Math.min(retryAfter / 5, 1_000);
}

/** A 409 `idempotency_key_in_progress`: read from a copy, the answer stays whole for the caller. */
async function inProgress(response: Response): Promise<boolean> {
  try {
    const answer = (await response.clone().json()) as { error?: { code?: unknown } };
    return answer.error?.code === 'idempotency_key_in_progress';
  } catch {
    return false;
  }
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
