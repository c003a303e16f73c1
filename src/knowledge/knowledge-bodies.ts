import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import type { Request, Response } from 'express';
import type { IncomingHttpHeaders } from 'node:http';
import { from, type Observable, switchMap } from 'rxjs';
import { organizationOf, type RequestWithCaller } from '../common/auth/caller';
import { onResponseDone } from '../common/http/response-done';
import { tooManyStreams } from '../common/streams/stream-slots.service';
import { OrganizationsService } from '../organizations/organizations.service';
import { KNOWLEDGE_HEAVY_WRITE_BYTES } from './knowledge-write-turns';

/** A JSON body of a document may take this many bytes (its content: at most 1 MiB of UTF-8). */
export const KNOWLEDGE_JSON_MAX_BYTES = 4 * 1024 * 1024;

/** The most bytes of document bodies one account's writes hold on an instance: two of the largest. */
export const KNOWLEDGE_BODY_BYTES_PER_ACCOUNT = 8 * 1024 * 1024;

/** The most bytes of document bodies every account's writes hold on an instance together. */
export const KNOWLEDGE_BODY_BYTES_PER_INSTANCE = 32 * 1024 * 1024;

/**
 * The bytes of document bodies that knowledge writes hold on this instance. A write's body is
 * read once the guards let it in; the write then waits for its organization's turn and the heavy
 * slot (KnowledgeWriteTurns) with it in memory: one account's ten organizations, nine writes each
 * of 4 MiB bodies, grew a service by half a gigabyte, past the pod's memory limit (found by
 * review). Two bounds, each refused with 429 `too_many_streams` and Retry-After:
 * - per account (the user who made the organization: OrganizationsService.accountOf), the
 *   declared length, held before the body is read: one account's writes read and wait with
 *   8 MiB at most, and a client sending its body slowly holds only its own account's share;
 * - per instance, what a write keeps of a large body once it is read (its content's text, and
 *   an uploaded file; KNOWLEDGE_HEAVY_WRITE_BYTES or more), held before the write waits: what
 *   waits on an instance is bounded however many accounts write, accounts filling it hold no
 *   one's small writes back, and a body padded with white space or escapes holds what it keeps,
 *   not what it was sent as (found by review).
 */
@Injectable()
export class KnowledgeBodies {
  private held = 0;
  private readonly heldByAccount = new Map<string, number>();

  /** Holds `bytes` for `account`; the function returned gives them back (once). */
  holdForAccount(account: string, bytes: number): () => void {
    const accountHeld = this.heldByAccount.get(account) ?? 0;
    if (accountHeld + bytes > KNOWLEDGE_BODY_BYTES_PER_ACCOUNT) {
      throw tooManyStreams(
        `This account's documents being written on this instance already hold ${mib(accountHeld)} MiB of ${mib(KNOWLEDGE_BODY_BYTES_PER_ACCOUNT)}; retry when one ends`,
      );
    }
    this.heldByAccount.set(account, accountHeld + bytes);
    return once(() => {
      const left = (this.heldByAccount.get(account) ?? bytes) - bytes;
      if (left > 0) this.heldByAccount.set(account, left);
      else this.heldByAccount.delete(account);
    });
  }

  /** Holds the `bytes` read of a body on the instance, if it is large; gives them back (once). */
  holdOnInstance(bytes: number): () => void {
    if (bytes < KNOWLEDGE_HEAVY_WRITE_BYTES) return () => undefined;
    if (this.held + bytes > KNOWLEDGE_BODY_BYTES_PER_INSTANCE) {
      throw tooManyStreams(
        'Too many large documents are being written on this instance; retry shortly',
      );
    }
    this.held += bytes;
    return once(() => {
      this.held -= bytes;
    });
  }

  /** Bytes held on this instance, or by `account` (for specs and logs). */
  heldBytes(account?: string): number {
    return account === undefined ? this.held : (this.heldByAccount.get(account) ?? 0);
  }
}

function once(release: () => void): () => void {
  let released = false;
  return () => {
    if (released) return;
    released = true;
    release();
  };
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

/**
 * What a document write's body may take, before it is read: its Content-Length, or the most a
 * document route reads when it is chunked (Node refuses a request declaring both, and a length
 * that is not a number); none without a body.
 */
export function declaredBodyBytes(headers: IncomingHttpHeaders): number {
  if (headers['transfer-encoding'] !== undefined) return KNOWLEDGE_JSON_MAX_BYTES;
  const declared = Number(headers['content-length'] ?? 0);
  return Number.isSafeInteger(declared) ? Math.min(declared, KNOWLEDGE_JSON_MAX_BYTES) : 0;
}

/**
 * Before a document write's body is read (the first of its route's interceptors): holds its
 * declared length (KNOWLEDGE_JSON_MAX_BYTES, the most a document route reads, when it declares
 * none) for the organization's account until the answer is done.
 */
@Injectable()
export class KnowledgeBodyInterceptor implements NestInterceptor {
  constructor(
    private readonly bodies: KnowledgeBodies,
    private readonly organizations: OrganizationsService,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<Request & RequestWithCaller>();
    const bytes = declaredBodyBytes(request.headers);
    if (bytes === 0) return next.handle();
    const organizationId = organizationOf(request, 'A document write');
    return from(this.organizations.accountOf(organizationId)).pipe(
      switchMap((account) => {
        onResponseDone(http.getResponse<Response>(), this.bodies.holdForAccount(account, bytes));
        return next.handle();
      }),
    );
  }
}

/**
 * Once a document write's body is read (after ParsesJsonBodyAfterGuards and the upload's
 * interceptors) and before the write waits its turn: holds what it keeps on the instance until
 * the answer is done, its content's text (two bytes a UTF-16 unit, as a string holds it at most)
 * and an uploaded file's bytes.
 */
@Injectable()
export class KnowledgeBodyReadInterceptor implements NestInterceptor {
  constructor(private readonly bodies: KnowledgeBodies) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<Request & { file?: { size: number } }>();
    const content = (request.body as { content?: unknown } | undefined)?.content;
    const kept = (typeof content === 'string' ? 2 * content.length : 0) + (request.file?.size ?? 0);
    onResponseDone(http.getResponse<Response>(), this.bodies.holdOnInstance(kept));
    return next.handle();
  }
}
