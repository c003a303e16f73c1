import {
  CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { defer, finalize, from, mergeMap, type Observable, switchMap, throwError } from 'rxjs';
import { organizationOf, type RequestWithCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import type { DocumentRequest } from '../common/http/document-body';
import { IDEMPOTENCY_KEY_HEADER, parseIdempotencyKey } from '../common/http/idempotency-key';
import { tooManyStreams } from '../common/streams/stream-slots.service';
import { memoryConfig } from '../config/memory.config';
import { IdempotencyService, keyInProgress } from '../idempotency/idempotency.service';
import { OrganizationsService } from '../organizations/organizations.service';

/**
 * An upload holding a slot whose body has arrived slower than this, after SLOW_UPLOAD_GRACE_MS,
 * gives its slot up to a newcomer when none is free: a 16 MiB document at this rate would take
 * 32 s, past REQUEST_TIMEOUT_MS's default anyway.
 */
export const SLOW_UPLOAD_BYTES_PER_SECOND = 512 * 1_024;
/** How long a slot is held before its upload's rate is judged (the Retry-After of a refusal). */
export const SLOW_UPLOAD_GRACE_MS = 5_000;

/** A slot's upload, as ImportSlots sees it. */
export interface SlotUpload {
  /** Bytes of the request received so far. */
  received(): number;
  /** Whether the whole body has arrived: the import is then running, and keeps its slot. */
  complete(): boolean;
  /** Stops receiving its body; the answer (408) gives the slot back. */
  abandon(): void;
}

interface Holder {
  account: string;
  upload: SlotUpload;
  takenAtMs: number;
  receivedAtTake: number;
}

/**
 * The imports this instance runs at once: at most IMPORTS_IN_FLIGHT (contract §29), each holding
 * its document in a temporary file of up to IMPORT_MAX_BYTES and a few megabytes of memory; of
 * them, one account (the user who made an organization, OrganizationsService.accountOf: every
 * organization one user made) at most half (at least one), so that one importing without pause
 * leaves the others room: per organization, one user's two organizations held every slot. A slot
 * is taken before the body is read (the temporary space is bounded by them), so one whose body
 * trickles in would hold it up to REQUEST_TIMEOUT_MS, and two accounts would hold every slot
 * (review, 2026-12-05): when none is free, the slowest upload still arriving below
 * SLOW_UPLOAD_BYTES_PER_SECOND, after SLOW_UPLOAD_GRACE_MS, is abandoned (408) and its slot given
 * to the newcomer.
 */
@Injectable()
export class ImportSlots {
  private readonly holders = new Set<Holder>();
  private readonly byAccount = new Map<string, number>();
  private readonly limit: number;
  private readonly perAccount: number;

  constructor(@Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>) {
    this.limit = memory.importsInFlight;
    this.perAccount = Math.ceil(this.limit / 2);
  }

  /**
   * Takes a slot for the account's import, or throws 429 `too_many_streams`; the answer gives it
   * back, once.
   */
  take(account: string, upload: SlotUpload, nowMs = Date.now()): () => void {
    const mine = this.byAccount.get(account) ?? 0;
    if (mine >= this.perAccount) {
      throw tooManyStreams(
        `This instance already runs ${mine} imports of this organization or of others made by the same user (half of IMPORTS_IN_FLIGHT); retry when one ends`,
      );
    }
    if (this.holders.size >= this.limit) {
      const slowest = this.slowestUpload(nowMs);
      if (!slowest) {
        throw tooManyStreams(
          `This instance already runs ${this.limit} imports (IMPORTS_IN_FLIGHT); retry when one ends`,
        );
      }
      this.give(slowest);
      slowest.upload.abandon();
    }
    const holder: Holder = {
      account,
      upload,
      takenAtMs: nowMs,
      receivedAtTake: upload.received(),
    };
    this.holders.add(holder);
    this.byAccount.set(account, mine + 1);
    return () => this.give(holder);
  }

  /** Imports running now (tests and metrics). */
  get inFlight(): number {
    return this.holders.size;
  }

  /** The upload still arriving slowest, if below the floor and held past the grace. */
  private slowestUpload(nowMs: number): Holder | undefined {
    let slowest: { holder: Holder; rate: number } | undefined;
    for (const holder of this.holders) {
      const heldMs = nowMs - holder.takenAtMs;
      if (heldMs < SLOW_UPLOAD_GRACE_MS || holder.upload.complete()) continue;
      const rate = ((holder.upload.received() - holder.receivedAtTake) * 1_000) / heldMs;
      if (rate >= SLOW_UPLOAD_BYTES_PER_SECOND) continue;
      if (!slowest || rate < slowest.rate) slowest = { holder, rate };
    }
    return slowest?.holder;
  }

  /** Gives a slot back, once. */
  private give(holder: Holder): void {
    if (!this.holders.delete(holder)) return;
    const left = (this.byAccount.get(holder.account) ?? 1) - 1;
    if (left > 0) this.byAccount.set(holder.account, left);
    else this.byAccount.delete(holder.account);
  }
}

/**
 * Takes an import slot before the body is read, and gives it back once the import is answered:
 * its document received, checked and written, or refused. Runs after the guards, so a request
 * refused by them takes no slot. The upload may be abandoned for a newcomer while its body
 * trickles in (ImportSlots): the body's reading then fails with 408 `request_timeout`. A request
 * refused a slot whose Idempotency-Key a running import holds is answered 409
 * `idempotency_key_in_progress` (contract §16), not 429: its retry is not one more import.
 */
@Injectable()
export class ImportSlotInterceptor implements NestInterceptor {
  constructor(
    private readonly slots: ImportSlots,
    private readonly organizations: OrganizationsService,
    private readonly idempotency: IdempotencyService,
  ) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<RequestWithCaller & DocumentRequest>();
    const organizationId = organizationOf(request, 'an import slot');
    return from(this.organizations.accountOf(organizationId)).pipe(
      switchMap((account) => this.withSlot(account, organizationId, request, next)),
    );
  }

  private withSlot(
    account: string,
    organizationId: string,
    request: RequestWithCaller & DocumentRequest,
    next: CallHandler,
  ): Observable<unknown> {
    return defer(() => {
      let release: () => void;
      try {
        release = this.takeSlot(account, request);
      } catch (refusal) {
        return from(this.answerFor(refusal, organizationId, request)).pipe(
          mergeMap((answer) => throwError(() => answer)),
        );
      }
      return next.handle().pipe(finalize(release));
    });
  }

  /** The refusal of a slot, or 409 when the request's key is held by an import running now. */
  private async answerFor(
    refusal: unknown,
    organizationId: string,
    request: RequestWithCaller & DocumentRequest,
  ): Promise<unknown> {
    const header = request.headers[IDEMPOTENCY_KEY_HEADER];
    if (header === undefined || !(refusal instanceof AppError)) return refusal;
    const key = parseIdempotencyKey(header);
    const running = await this.idempotency
      .isRunning({ scopeType: 'organization', scopeId: organizationId, key })
      // Not known: the refusal the request was going to get anyway.
      .catch(() => false);
    return running ? keyInProgress() : refusal;
  }

  private takeSlot(account: string, request: RequestWithCaller & DocumentRequest): () => void {
    const abandoned = new AbortController();
    request.documentAbandoned = abandoned.signal;
    return this.slots.take(account, {
      received: () => request.socket.bytesRead,
      complete: () => request.complete,
      abandon: () =>
        abandoned.abort(
          new AppError(
            'request_timeout',
            `The body arrived slower than ${SLOW_UPLOAD_BYTES_PER_SECOND / 1_024} KiB/s while another import waited for its slot`,
          ),
        ),
    });
  }
}

/** On the import's handler, below @ReadsDocumentBody() so that the slot is taken first. */
export const TakesImportSlot = (): MethodDecorator => UseInterceptors(ImportSlotInterceptor);
