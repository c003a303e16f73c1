import type { NextFunction, Request, RequestHandler, Response } from 'express';
import { json } from 'express';
import { AppError } from '../errors/app-error';

export const BODY_LIMIT_BYTES = 1024 * 1024;

const METHODS_WITH_BODY = new Set(['POST', 'PUT', 'PATCH', 'DELETE']);

function hasBody(request: Request): boolean {
  const length = request.headers['content-length'];
  if (length !== undefined) return length !== '0';
  return request.headers['transfer-encoding'] !== undefined;
}

/** Maps body-parser's failures to the contract's codes instead of Express's HTML pages. */
function toAppError(error: { type?: string; status?: number }): AppError {
  switch (error.type) {
    case 'entity.too.large':
      return new AppError('payload_too_large', 413, `The body exceeds ${BODY_LIMIT_BYTES} bytes`);
    case 'encoding.unsupported':
    case 'charset.unsupported':
      return new AppError('unsupported_media_type', 415, 'The body must be UTF-8 encoded JSON');
    case 'entity.verify.failed':
    case 'entity.parse.failed':
      return new AppError('malformed_json', 400, 'The body is not valid JSON');
    default:
      return new AppError('malformed_json', 400, 'The body could not be read');
  }
}

/** True when a parsed body holds a `__proto__` key at any depth. */
function hasProtoKey(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if (Object.prototype.hasOwnProperty.call(value, '__proto__')) return true;
  return Object.values(value).some(hasProtoKey);
}

/** Only bodies that spell `__proto__` (or hide it behind \u escapes) are walked. */
function mayHoldProtoKey(raw: Buffer): boolean {
  return raw.includes('__proto__') || raw.includes('\\u');
}

/**
 * Parses JSON bodies up to 1 MiB and refuses any other content type with 415. The raw bytes are
 * kept on `request.rawBody` for signature checks (Stripe webhooks).
 */
export function jsonBodyMiddleware(): RequestHandler {
  const parse = json({
    limit: BODY_LIMIT_BYTES,
    strict: true,
    type: () => true,
    verify: (request, _response, buffer) => {
      (request as Request & { rawBody?: Buffer }).rawBody = buffer;
    },
  });

  return (request: Request, response: Response, next: NextFunction) => {
    if (!METHODS_WITH_BODY.has(request.method) || !hasBody(request)) return next();
    const contentType = request.headers['content-type'] ?? '';
    const mediaType = contentType.split(';')[0].trim().toLowerCase();
    if (mediaType !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(mediaType)) {
      return next(new AppError('unsupported_media_type', 415, 'Send the body as application/json'));
    }
    parse(request, response, (error?: unknown) => {
      if (error) return next(toAppError(error));
      const raw = (request as Request & { rawBody?: Buffer }).rawBody;
      if (raw && mayHoldProtoKey(raw) && hasProtoKey(request.body)) {
        // A prototype-pollution attempt: refuse it before any code copies the object.
        return next(AppError.validation([{ field: '__proto__', problem: 'is not allowed' }]));
      }
      next();
    });
  };
}
