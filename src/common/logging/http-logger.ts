import type { NextFunction, Request, Response } from 'express';
import { createHmac } from 'node:crypto';
import type { ServerResponse } from 'node:http';
import { storage, Store } from 'nestjs-pino/storage';
import type { Logger } from 'pino';
import { newRequestId, REQUEST_ID_HEADER } from '../http/request-id';
import { routeTemplateOf } from '../http/route-template';

/** What the access line and the metrics say of a request answered nothing: nginx's 499. */
export const CLIENT_CLOSED_REQUEST = 499;

type LoggedRequest = Request & { id?: string; log?: Logger };
type LoggedResponse = Response & { err?: Error };

/**
 * Told of every finished request, where the access line is written (metrics record there, so a
 * request costs one 'close' listener for both); defined here so common/ imports no feature. A
 * request Node's parser refused has no route and its method is UNPARSED_METHOD.
 */
export type ResponseObserver = (
  request: Pick<Request, 'method'>,
  status: number,
  durationMs?: number,
) => void;

/** The method a line and the metrics give a request Node's HTTP parser refused. */
export const UNPARSED_METHOD = '(unparsed)';

/** A request Node's HTTP parser refused, as the server answered it (http-adapter.ts). */
export interface RefusedRequest {
  requestId: string;
  status: number;
  code: string;
  /** Its method, when the parser read it (a CONNECT, which Express never sees). */
  method?: string;
}

/** Answers the server wrote on a request's connection itself, for its access line. */
const socketAnswers = new WeakMap<ServerResponse, { status: number; code: string }>();

/**
 * The server answered a request on its connection, past Express (a body that never arrived:
 * 408): its access line and the metrics say so, instead of a 499 for the answer Express never
 * sent (review).
 */
export function answeredOnSocket(
  response: ServerResponse,
  answer: { status: number; code: string },
): void {
  socketAnswers.set(response, answer);
}

/** What a request line says of the path: no path parameter and no query in clear. */
export const UNMATCHED_PATH = '(unmatched)';

function rawPathOf(request: Request): string {
  const url = request.originalUrl ?? request.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The path of a request line: the route template (`/v1/end-users/:user_id/export`) and each path
 * parameter as a keyed hash, so that lines about one end user correlate without naming them (a
 * user_id is often an e-mail address, and stays in logs after an erasure). A request no route
 * matched logs `(unmatched)` and a hash of its whole path.
 */
function pathFields(request: Request, hash: (value: string) => string): Record<string, unknown> {
  const template = routeTemplateOf(request);
  if (template === undefined) {
    return { path: UNMATCHED_PATH, path_hash: hash(rawPathOf(request)) };
  }
  const params = request.params as Record<string, unknown> | undefined;
  const names = params ? Object.keys(params) : [];
  if (names.length === 0) return { path: template };
  return {
    path: template,
    params: Object.fromEntries(names.map((name) => [name, hash(String(params![name]))])),
  };
}

/** A short keyed hash (HMAC-SHA256, 64 bits): enough to correlate, useless to look up. */
export function logHasher(key: string): (value: string) => string {
  return (value) => createHmac('sha256', key).update(value).digest('hex').slice(0, 16);
}

/**
 * The first middleware of every request: gives it a new ULID (an incoming X-Request-Id is never
 * trusted), sends it back as X-Request-Id (with `nosniff`), binds a child logger carrying it
 * (`request.log`, and nestjs-pino's request store, from which PinoLogger hands it to services),
 * and writes one JSON line when the response ends: requestId, method, path (the route template;
 * parameters hashed), status, duration_ms, and `err` for unexpected errors. Headers, bodies and
 * raw path parameters are never logged. Written by hand rather than with pino-http, which made a request cost noticeably more
 * (see bench/results/changelog.json); nestjs-pino still needs pino-http installed as its peer.
 */
export function createHttpLogger(logger: Logger, hashKey: string, observe?: ResponseObserver) {
  const hash = logHasher(hashKey);
  // The access line has fixed, safe fields, so it skips redaction (a walk of every line); lines
  // that carry an error keep it.
  const accessLog = logger.child({}, { redact: { paths: [] } });

  return (request: LoggedRequest, response: LoggedResponse, next: NextFunction): void => {
    const requestId = newRequestId();
    const started = performance.now();
    request.id = requestId;
    request.log = logger.child({ requestId });
    response.setHeader(REQUEST_ID_HEADER, requestId);
    // Every answer is JSON (or an event stream): browsers must never sniff it into HTML.
    response.setHeader('X-Content-Type-Options', 'nosniff');

    response.once('close', () => {
      // Gone before any answer was sent (the client hung up, or the request was cut): not the
      // 200 or 201 Nest set in advance, which dashboards would count as successes (review). The
      // response itself keeps its status: an idempotent answer stored after the client left is
      // the handler's, replayed as such.
      const onSocket = socketAnswers.get(response);
      const status =
        onSocket?.status ?? (response.headersSent ? response.statusCode : CLIENT_CLOSED_REQUEST);
      const durationMs = performance.now() - started;
      observe?.(request, status, durationMs);
      const line: Record<string, unknown> = {
        requestId,
        method: request.method,
        ...pathFields(request, hash),
        status,
        ...(onSocket && { code: onSocket.code }),
        duration_ms: Math.round(durationMs),
      };
      if (!response.writableFinished) line.aborted = true;
      if (response.err) {
        logger.error({ ...line, err: response.err }, 'request failed');
      } else if (status >= 500) {
        accessLog.error(line, 'request failed');
      } else if (status >= 400) {
        accessLog.warn(line, 'request completed');
      } else {
        accessLog.info(line, 'request completed');
      }
    });
    storage.run(new Store(request.log), next);
  };
}

/**
 * The access line and the metrics of a request Node's parser refused before any middleware saw
 * it (an over-long request line, bytes that are not HTTP, headers that never ended): without
 * them such traffic, a misconfigured proxy's or an attack's, left no trace. A request whose body
 * never arrived has its own line (answeredOnSocket).
 */
export function createRefusalLogger(logger: Logger, observe?: ResponseObserver) {
  const accessLog = logger.child({}, { redact: { paths: [] } });
  return ({ requestId, status, code, method = UNPARSED_METHOD }: RefusedRequest): void => {
    // No duration: the request's start is not known (a 408 comes at the end of a timeout).
    observe?.({ method }, status);
    accessLog.warn({ requestId, method, path: UNMATCHED_PATH, status, code }, 'request refused');
  };
}
