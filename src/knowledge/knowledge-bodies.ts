import {
  type CallHandler,
  type ExecutionContext,
  Injectable,
  type NestInterceptor,
} from '@nestjs/common';
import type { Response } from 'express';
import { from, type Observable, switchMap } from 'rxjs';
import { organizationOf, type RequestWithCaller } from '../common/auth/caller';
import type { LateJsonRequest } from '../common/http/json-body.middleware';
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
 * The bytes of document bodies that knowledge writes hold on this instance, by account (the
 * user who made the organization: OrganizationsService.accountOf). A write's body is read once
 * the guards let it in; the write then waits for its organization's turn and the heavy slot
 * (KnowledgeWriteTurns) with it in memory: one account's ten organizations, nine writes each of
 * 4 MiB bodies, grew a service by half a gigabyte, past the pod's memory limit (found by
 * review). Past either bound the write is refused as soon as its body is read, before it waits:
 * 429 `too_many_streams`, with Retry-After. Only a large body (KNOWLEDGE_HEAVY_WRITE_BYTES or
 * more) is refused for the instance's bound, so that accounts filling it with large writes hold
 * no one's small ones back.
 */
@Injectable()
export class KnowledgeBodies {
  private held = 0;
  private readonly heldByAccount = new Map<string, number>();

  /** Holds `bytes` for `account`; the function returned gives them back (once). */
  hold(account: string, bytes: number): () => void {
    const accountHeld = this.heldByAccount.get(account) ?? 0;
    if (accountHeld + bytes > KNOWLEDGE_BODY_BYTES_PER_ACCOUNT) {
      throw tooManyStreams(
        `This account's documents being written on this instance already hold ${mib(accountHeld)} MiB of ${mib(KNOWLEDGE_BODY_BYTES_PER_ACCOUNT)}; retry when one ends`,
      );
    }
    if (
      bytes >= KNOWLEDGE_HEAVY_WRITE_BYTES &&
      this.held + bytes > KNOWLEDGE_BODY_BYTES_PER_INSTANCE
    ) {
      throw tooManyStreams(
        'Too many large documents are being written on this instance; retry shortly',
      );
    }
    this.held += bytes;
    this.heldByAccount.set(account, accountHeld + bytes);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.held -= bytes;
      const left = (this.heldByAccount.get(account) ?? bytes) - bytes;
      if (left > 0) this.heldByAccount.set(account, left);
      else this.heldByAccount.delete(account);
    };
  }

  /** Bytes held on this instance, and by `account` (for specs and logs). */
  heldBytes(account?: string): number {
    return account === undefined ? this.held : (this.heldByAccount.get(account) ?? 0);
  }
}

function mib(bytes: number): string {
  return (bytes / (1024 * 1024)).toFixed(1);
}

/**
 * Holds a document write's body in KnowledgeBodies until its answer is done, once the body is
 * read (after ParsesJsonBodyAfterGuards and the upload's interceptors) and before the write
 * waits its turn: what a body holds is what was read of it, so a client sending one slowly
 * holds nothing meanwhile.
 */
@Injectable()
export class KnowledgeBodyInterceptor implements NestInterceptor {
  constructor(
    private readonly bodies: KnowledgeBodies,
    private readonly organizations: OrganizationsService,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const http = context.switchToHttp();
    const request = http.getRequest<
      LateJsonRequest & RequestWithCaller & { file?: { size: number } }
    >();
    const bytes = request.jsonBodyBytes ?? request.file?.size ?? 0;
    if (bytes <= 0) return next.handle();
    const organizationId = organizationOf(request, 'A document write');
    return from(this.organizations.accountOf(organizationId)).pipe(
      switchMap((account) => {
        onResponseDone(http.getResponse<Response>(), this.bodies.hold(account, bytes));
        return next.handle();
      }),
    );
  }
}
