import {
  CallHandler,
  createParamDecorator,
  ExecutionContext,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { IncomingMessage } from 'node:http';
import { finalize, from, mergeMap, type Observable } from 'rxjs';
import { AppError } from '../errors/app-error';
import { SpooledDocument, spoolDocument, tooLarge } from './spooled-document';

/**
 * A request to a document route (JsonBodyOptions.documentRoutes): its body is left unread by
 * the body middleware, which only notes how much it may be, and is read after the guards.
 */
export type DocumentRequest = IncomingMessage & {
  documentBodyLimit?: number;
  /** Aborted to stop receiving the body, the reason (an AppError) answered (ImportSlots). */
  documentAbandoned?: AbortSignal;
};

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
  const encoded = encodedBodyRefusal(request);
  if (encoded) return encoded;
  request.documentBodyLimit = limitBytes;
  return undefined;
}

/**
 * 415 for a body sent with a Content-Encoding: no body is inflated (a bomb's bytes are not read
 * as its size), and one read as it came would be taken for what it encodes.
 */
export function encodedBodyRefusal(request: IncomingMessage): AppError | undefined {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity') return undefined;
  return new AppError('unsupported_media_type', 'Send the body without a Content-Encoding');
}

/**
 * Receives a document route's body once the guards have let the request through, so neither an
 * unauthenticated client nor one over its rate limit gets a large body read: into a temporary
 * file, checked as it arrives (spooled-document.ts), never parsed whole. The handler reads it with
 * @DocumentBody(); the file goes when the handler is done. Placed before any interceptor that
 * reads the body (Idempotency-Key's, which compares the document's digest).
 */
@Injectable()
export class DocumentBodyInterceptor implements NestInterceptor {
  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<Request & DocumentRequest>();
    // No limit noted: the request had no body (the body middleware leaves those alone).
    if (request.documentBodyLimit === undefined) return next.handle();
    const spooling = spoolDocument(request, request.documentBodyLimit, request.documentAbandoned);
    return from(spooling).pipe(
      mergeMap((document) => {
        request.body = document;
        // Closing a descriptor of an unlinked file can only fail if it is closed already.
        return next.handle().pipe(finalize(() => void document.close().catch(() => undefined)));
      }),
    );
  }
}

/** On a document route's handler, below @AcceptsIdempotencyKey() so that it runs first. */
export const ReadsDocumentBody = (): MethodDecorator => UseInterceptors(DocumentBodyInterceptor);

/** The handler's document (ReadsDocumentBody); 400 when the request had no body. */
export const DocumentBody = createParamDecorator(
  (_data: unknown, context: ExecutionContext): SpooledDocument => {
    const body: unknown = context.switchToHttp().getRequest<Request>().body;
    if (body instanceof SpooledDocument) return body;
    throw AppError.validation([{ field: '', problem: 'must be a JSON object' }]);
  },
);
