import { request as httpRequest, type ClientRequest, type RequestOptions } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { guardedLookup, hostOf, isPublicAddress, UnsafeAddressError } from './ssrf-guard';

export interface SendOptions {
  timeoutMs: number;
  allowPrivateUrls: boolean;
  /** Aborts the request (shutdown); the outcome is then `aborted`. */
  signal: AbortSignal;
  /**
   * Read the answer's body, of at most this many bytes (a longer one is an error), within
   * `timeoutMs`; left out, only the status is awaited and the body is not read.
   */
  maxBodyBytes?: number;
}

export type SendOutcome =
  | { kind: 'response'; status: number; durationMs: number; body?: string }
  | { kind: 'error'; error: string; durationMs: number }
  | { kind: 'aborted' };

const USER_AGENT = 'personality-api-webhooks/1';

/**
 * POSTs one signed body. The address is checked again now (the name resolved and every answer
 * checked, the connection made to a checked address); redirects are not followed (a 3xx is a
 * failed attempt); the whole exchange, DNS and connection included, must produce a status within
 * `timeoutMs`. No keep-alive: a reused socket would skip the address check.
 */
export function sendWebhook(
  url: string,
  body: string,
  headers: Record<string, string>,
  options: SendOptions,
): Promise<SendOutcome> {
  const started = performance.now();
  const elapsed = () => Math.round(performance.now() - started);
  return new Promise<SendOutcome>((resolve) => {
    let target: URL;
    try {
      target = new URL(url);
    } catch {
      resolve({ kind: 'error', error: 'invalid URL', durationMs: 0 });
      return;
    }
    const host = hostOf(target);
    if (!options.allowPrivateUrls && isIP(host) && !isPublicAddress(host)) {
      resolve({ kind: 'error', error: new UnsafeAddressError(host).message, durationMs: 0 });
      return;
    }
    if (options.signal.aborted) {
      resolve({ kind: 'aborted' });
      return;
    }

    let settled = false;
    let request: ClientRequest | undefined;
    const finish = (outcome: SendOutcome) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal.removeEventListener('abort', onAbort);
      request?.destroy();
      resolve(outcome);
    };
    const timer = setTimeout(
      () =>
        finish({
          kind: 'error',
          error: `timed out after ${options.timeoutMs} ms`,
          durationMs: elapsed(),
        }),
      options.timeoutMs,
    );
    const onAbort = () => finish({ kind: 'aborted' });
    options.signal.addEventListener('abort', onAbort, { once: true });

    const requestOptions: RequestOptions = {
      method: 'POST',
      agent: false,
      headers: {
        ...headers,
        'content-type': 'application/json',
        'content-length': String(Buffer.byteLength(body)),
        'user-agent': USER_AGENT,
      },
      ...(options.allowPrivateUrls ? {} : { lookup: guardedLookup }),
    };
    const send = target.protocol === 'https:' ? httpsRequest : httpRequest;
    try {
      request = send(target, requestOptions, (response) => {
        const status = response.statusCode ?? 0;
        const limit = options.maxBodyBytes;
        // Without a limit the status is the answer; the body is not read (nor kept).
        if (limit === undefined) return finish({ kind: 'response', status, durationMs: elapsed() });
        const chunks: Buffer[] = [];
        let size = 0;
        response.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > limit) {
            finish({ kind: 'error', error: `answer over ${limit} bytes`, durationMs: elapsed() });
          } else {
            chunks.push(chunk);
          }
        });
        response.on('end', () =>
          finish({
            kind: 'response',
            status,
            durationMs: elapsed(),
            body: Buffer.concat(chunks).toString('utf8'),
          }),
        );
        response.on('error', (error) =>
          finish({ kind: 'error', error: describe(error), durationMs: elapsed() }),
        );
      });
    } catch (error) {
      finish({ kind: 'error', error: describe(error), durationMs: elapsed() });
      return;
    }
    request.on('error', (error) =>
      finish({ kind: 'error', error: describe(error), durationMs: elapsed() }),
    );
    request.end(body);
  });
}

/** A short, safe description of a network error (no headers, no body). */
function describe(error: unknown): string {
  if (error instanceof UnsafeAddressError) return error.message;
  if (error instanceof Error) {
    const code = (error as NodeJS.ErrnoException).code;
    return (code ? `${code}: ${error.message}` : error.message).slice(0, 500);
  }
  return 'request failed';
}
