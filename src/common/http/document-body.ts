import {
  CallHandler,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { IncomingMessage } from 'node:http';
import { from, mergeMap, type Observable } from 'rxjs';
import { AppError } from '../errors/app-error';
import {
  findUnsafeContent,
  jsonNestsDeeperThan,
  MAX_JSON_DEPTH,
  mayHoldUnsafeContent,
} from '../validation/untrusted-json';

/**
 * A request to a document route (JsonBodyOptions.documentRoutes): its body is left unread by
 * the body middleware, which only notes how much it may be, and is read after the guards.
 */
export type DocumentRequest = IncomingMessage & { documentBodyLimit?: number };

export function tooLarge(limitBytes: number): AppError {
  return new AppError('payload_too_large', `The body exceeds the ${limitBytes} bytes it may have`);
}

/**
 * Before routing, what can be refused of a document route's body without reading it: a declared
 * Content-Length over the limit (413) and a Content-Encoding (415). Else notes the limit for
 * ReadsDocumentBody. The connection is not kept alive: a body left unread (an answer from a
 * guard, a refusal at the limit) is not drained, the client's sending ends with it.
 */
export function admitDocument(
  request: DocumentRequest,
  response: Response,
  limitBytes: number,
): AppError | undefined {
  response.setHeader('Connection', 'close');
  const declared = request.headers['content-length'];
  if (declared !== undefined && Number(declared) > limitBytes) return tooLarge(limitBytes);
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding !== 'identity') {
    return new AppError('unsupported_media_type', 'Send the body without a Content-Encoding');
  }
  request.documentBodyLimit = limitBytes;
  return undefined;
}

/**
 * Reads a request's body of at most `limitBytes` into one Buffer. A declared Content-Length
 * (already checked against the limit) is written straight into a Buffer of that size; a chunked
 * body is kept as its chunks and joined once at the end. Past the limit, reading stops there:
 * nothing more is taken in.
 */
export function readBody(request: IncomingMessage, limitBytes: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const header = request.headers['content-length'];
    // Node's parser has checked that Content-Length is a whole number and delivers exactly it.
    const whole = header === undefined ? undefined : Buffer.allocUnsafe(Number(header));
    const chunks: Buffer[] = [];
    let received = 0;

    const stop = () => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onFailure);
      request.off('close', onClose);
    };
    const fail = (error: AppError) => {
      stop();
      request.pause();
      reject(error);
    };
    const onData = (chunk: Buffer) => {
      if (received + chunk.length > (whole?.length ?? limitBytes))
        return fail(tooLarge(limitBytes));
      if (whole) chunk.copy(whole, received);
      else chunks.push(chunk);
      received += chunk.length;
    };
    const onEnd = () => {
      stop();
      if (whole && received !== whole.length) {
        reject(new AppError('malformed_json', 'The body ended before its Content-Length'));
      } else {
        resolve(whole ?? Buffer.concat(chunks, received));
      }
    };
    const onFailure = () => fail(new AppError('malformed_json', 'The body could not be read'));
    // The client went away before the end: nobody is left to answer, but the promise must end.
    const onClose = () => {
      if (!request.complete) onFailure();
    };

    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onFailure);
    request.on('close', onClose);
  });
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A document body under the checks of every JSON body (contract §14), with JSON-pointer paths:
 * the depth on the bytes before parsing, the text decoded (UTF-8, strictly) and parsed once, a
 * JSON object, no forbidden key or unstorable text. The bytes and the text are garbage as soon
 * as the value is built; nothing else keeps them (no rawBody: there is no signature to check).
 */
export async function parseDocumentBody(request: DocumentRequest): Promise<unknown> {
  let bytes: Buffer | undefined = await readBody(request, request.documentBodyLimit ?? 0);
  if (jsonNestsDeeperThan(bytes, MAX_JSON_DEPTH)) {
    throw AppError.validation([
      { field: '', problem: `must not nest deeper than ${MAX_JSON_DEPTH} levels` },
    ]);
  }
  const unsafeMaybe = mayHoldUnsafeContent(bytes);
  let text: string | undefined;
  try {
    text = decoder.decode(bytes);
  } catch {
    throw new AppError('malformed_json', 'The body is not UTF-8 text');
  }
  bytes = undefined;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    throw new AppError('malformed_json', 'The body is not valid JSON');
  }
  text = undefined;
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw AppError.validation([{ field: '', problem: 'must be a JSON object' }]);
  }
  const problem = unsafeMaybe ? findUnsafeContent(body, 'pointer') : null;
  if (problem) throw AppError.validation([problem]);
  return body;
}

/**
 * Reads a document route's body once the guards have let the request through, so neither an
 * unauthenticated client nor one over its rate limit gets a large body read and parsed. Placed
 * before any interceptor that reads the body (Idempotency-Key's).
 */
@Injectable()
export class DocumentBodyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<Request & DocumentRequest>();
    // No limit noted: not reached as a document route (the body middleware parsed it).
    if (request.documentBodyLimit === undefined) return next.handle();
    return from(parseDocumentBody(request)).pipe(
      mergeMap((body) => {
        request.body = body;
        return next.handle();
      }),
    );
  }
}

/** On a document route's handler, below @AcceptsIdempotencyKey() so that it runs first. */
export const ReadsDocumentBody = (): MethodDecorator => UseInterceptors(DocumentBodyInterceptor);
