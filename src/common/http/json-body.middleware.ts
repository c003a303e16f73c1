import { isUtf8 } from 'node:buffer';
import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { json } from 'express';
import { AppError } from '../errors/app-error';
import { admitDocument, type DocumentRequest, encodedBodyRefusal } from './document-body';
import {
  findUnsafeContent,
  jsonShapeExcess,
  type JsonShapeExcess,
  MAX_JSON_CONTAINERS,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  MAX_KEY_SQUARES,
  MAX_OBJECT_KEYS,
  mayHoldUnsafeContent,
  shapeProblem,
} from '../validation/untrusted-json';

export const BODY_LIMIT_BYTES = 1024 * 1024;

/** The methods whose body is read (and refused where the route takes none). */
export const METHODS_WITH_BODY: ReadonlySet<string> = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

const NOT_UTF8 = 'json.not.utf8';

type RequestWithRawBody = Request & { rawBody?: Buffer };

/**
 * A request to a large JSON route (JsonBodyOptions.largeJsonRoutes): its body is left unread by
 * the body middleware, which leaves here how to parse it, once the guards have let it through
 * (ParsesJsonBodyAfterGuards).
 */
export type LateJsonRequest = Request & { parseJsonBody?: () => Promise<void> };

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return request.headers['transfer-encoding'] !== undefined;
}

/** Maps body-parser's failures to the contract's codes instead of Express's HTML pages. */
function toAppError(error: { type?: string; limit?: number }): AppError {
  switch (error.type) {
    case 'json.depth':
    case 'json.object_keys':
    case 'json.key_squares':
    case 'json.containers':
    case 'json.values':
      return AppError.validation([
        {
          field: 'body',
          problem: shapeProblem(error.type.slice('json.'.length) as JsonShapeExcess),
        },
      ]);
    case NOT_UTF8:
      return new AppError('malformed_json', 'The body is not UTF-8 text');
    case 'entity.too.large':
      return new AppError(
        'payload_too_large',
        `The body exceeds ${error.limit ?? BODY_LIMIT_BYTES} bytes`,
      );
    case 'encoding.unsupported':
      return new AppError('unsupported_media_type', 'Send the body without a Content-Encoding');
    case 'charset.unsupported':
      return new AppError('unsupported_media_type', 'The body must be UTF-8 encoded JSON');
    case 'entity.verify.failed':
    case 'entity.parse.failed':
      return new AppError('malformed_json', 'The body is not valid JSON');
    default:
      return new AppError('malformed_json', 'The body could not be read');
  }
}

/** `application/json` or a `+json` type, in UTF-8 (RFC 8259 §8.1): the depth scan reads bytes. */
function isUtf8Json(contentType: string): boolean {
  const [mediaType, ...parameters] = contentType.toLowerCase().split(';');
  const type = mediaType.trim();
  if (type !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) return false;
  const charset = parameters.map((p) => p.trim()).find((p) => p.startsWith('charset='));
  return charset === undefined || /^charset="?utf-8"?$/.test(charset);
}

export interface JsonBodyOptions {
  /**
   * Routes whose body is one large document, by `METHOD /path` (e.g. `POST /v1/end-users/import`),
   * with the bytes each takes instead of BODY_LIMIT_BYTES. Their bodies are read after the guards,
   * by the handler's ReadsDocumentBody (document-body.ts); here only what needs no reading.
   */
  documentRoutes?: ReadonlyMap<string, number>;
  /**
   * Routes whose JSON body may be larger than BODY_LIMIT_BYTES, by a pattern of `METHOD /path`,
   * with the bytes it may take (a knowledge document: 1 MiB of text, escaped in JSON). Their
   * bodies are parsed after the guards, by the handler's ParsesJsonBodyAfterGuards, so that no
   * unauthenticated client gets megabytes parsed; under the same checks as every JSON body.
   */
  largeJsonRoutes?: ReadonlyArray<{ route: RegExp; limitBytes: number }>;
  /**
   * Routes that also take `multipart/form-data`, by `METHOD /path`: such a body is left unread
   * here, for the handler's FileInterceptor (multer, with limits of its own).
   */
  formRoutes?: ReadonlySet<string>;
}

function isMultipart(contentType: string): boolean {
  return contentType.split(';')[0].trim().toLowerCase() === 'multipart/form-data';
}

/** `POST /v1/end-users/import`, however Express's lenient routing would spell it. */
function routeKey(request: Request): string {
  const path = request.path.length > 1 ? request.path.replace(/\/$/, '') : request.path;
  return `${request.method} ${path.toLowerCase()}`;
}

/**
 * Parses JSON bodies up to 1 MiB and refuses any other content type with 415. Untrusted input is
 * bounded before it is walked: the nesting depth is checked on the raw bytes before JSON.parse,
 * and only then are keys and strings inspected. A body must be an object. The raw bytes are
 * kept on `request.rawBody` for signature checks (Stripe webhooks). Document routes take a
 * larger body under the same checks, read later (document-body.ts).
 */
export function jsonBodyMiddleware(options: JsonBodyOptions = {}): RequestHandler {
  const parse = jsonParser(BODY_LIMIT_BYTES);
  const largeParsers = (options.largeJsonRoutes ?? []).map(({ route, limitBytes }) => ({
    route,
    limitBytes,
    parse: jsonParser(limitBytes),
  }));

  return (request: RequestWithRawBody, response: Response, next: NextFunction) => {
    if (!METHODS_WITH_BODY.has(request.method) || !hasBody(request)) return next();
    const contentType = request.headers['content-type'] ?? '';
    // A form's body goes to multer as it came: one sent compressed was parsed as plain bytes
    // (brotli: stored; gzip: a 400 about the form) instead of refused as JSON is (review).
    if (isMultipart(contentType) && options.formRoutes?.has(routeKey(request))) {
      const refused = encodedBodyRefusal(request);
      // Refused unread: the connection goes with the answer, not on draining a form's megabytes.
      if (refused) response.setHeader('Connection', 'close');
      return next(refused);
    }
    if (!isUtf8Json(contentType)) {
      return next(
        new AppError('unsupported_media_type', 'Send the body as application/json (UTF-8)'),
      );
    }
    const key = routeKey(request);
    const documentLimit = options.documentRoutes?.get(key);
    if (documentLimit !== undefined) {
      return next(admitDocument(request as DocumentRequest, response, documentLimit));
    }
    const large = largeParsers.find(({ route }) => route.test(key));
    if (!large) return parseChecked(parse, request, response, next);
    // A declared length over the limit needs no reading, nor a caller: refused now, unread.
    if (Number(request.headers['content-length'] ?? 0) > large.limitBytes) {
      response.setHeader('Connection', 'close');
      return next(toAppError({ type: 'entity.too.large', limit: large.limitBytes }));
    }
    (request as LateJsonRequest).parseJsonBody = () =>
      new Promise<void>((resolve, reject) =>
        parseChecked(large.parse, request, response, (error?: unknown) => {
          // Checked: no signature reads a large route's bytes, and its write may wait its turn
          // for seconds, holding what it keeps (KnowledgeBodies).
          request.rawBody = undefined;
          // An AppError, or what body-parser's callback threw unexpectedly.
          if (error)
            reject(error instanceof Error ? error : new Error('The body could not be read'));
          else resolve();
        }),
      );
    next();
  };
}

/** Parses the body with `parser`, then refuses anything but an object, or unsafe content. */
function parseChecked(
  parser: RequestHandler,
  request: RequestWithRawBody,
  response: Response,
  next: (error?: unknown) => void,
): void {
  parser(request, response, (error?: unknown) => {
    // Everything here runs in body-parser's callback, where a throw would end the process.
    try {
      if (error) return next(toAppError(error));
      const body: unknown = request.body;
      if (body === null || typeof body !== 'object' || Array.isArray(body)) {
        return next(AppError.validation([{ field: 'body', problem: 'must be a JSON object' }]));
      }
      const problem =
        request.rawBody && mayHoldUnsafeContent(request.rawBody) ? findUnsafeContent(body) : null;
      next(problem ? AppError.validation([problem]) : undefined);
    } catch (unexpected) {
      next(unexpected);
    }
  });
}

/** body-parser's JSON parser with this limit, checking depth before parsing. */
function jsonParser(limit: number): RequestHandler {
  return json({
    limit,
    // A compressed body is refused (415): inflated before any guard, 1 KB of gzip made 1 MiB of
    // JSON for anyone to have parsed and copied (hostile review, 2026-12-06).
    inflate: false,
    // Any JSON value parses, so a string or array body is told apart from text that is not JSON.
    strict: false,
    type: () => true,
    verify: (request: RequestWithRawBody, _response, buffer) => {
      // The decoder would turn bytes that are not UTF-8 (a lone surrogate's, say) into U+FFFD,
      // and the text stored would not be the text sent (as document bodies, spooled-document.ts).
      if (!isUtf8(buffer)) throw Object.assign(new Error('not UTF-8'), { type: NOT_UTF8 });
      const excess = jsonShapeExcess(buffer, {
        depth: MAX_JSON_DEPTH,
        objectKeys: MAX_OBJECT_KEYS,
        keySquares: MAX_KEY_SQUARES,
        containers: MAX_JSON_CONTAINERS,
        values: MAX_JSON_VALUES,
      });
      if (excess)
        throw Object.assign(new Error(`body past its ${excess}`), { type: `json.${excess}` });
      request.rawBody = buffer;
    },
  });
}
