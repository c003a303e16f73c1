import {
  CallHandler,
  type ExecutionContext,
  Inject,
  Injectable,
  NestInterceptor,
  UseInterceptors,
} from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { defer, finalize, type Observable } from 'rxjs';
import { organizationOf, type RequestWithCaller } from '../common/auth/caller';
import { tooManyStreams } from '../common/streams/stream-slots.service';
import { memoryConfig } from '../config/memory.config';

/**
 * The imports this instance runs at once: at most IMPORTS_IN_FLIGHT (contract §29), each holding
 * its document in a temporary file of up to IMPORT_MAX_BYTES and a few megabytes of memory; of
 * them, one organization at most half (at least one), so that one importing without pause leaves
 * the others room.
 */
@Injectable()
export class ImportSlots {
  private held = 0;
  private readonly byOrganization = new Map<string, number>();
  private readonly limit: number;
  private readonly perOrganization: number;

  constructor(@Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>) {
    this.limit = memory.importsInFlight;
    this.perOrganization = Math.ceil(this.limit / 2);
  }

  /** Takes a slot, or throws 429 `too_many_streams`; the answer gives it back, once. */
  take(organizationId: string): () => void {
    if (this.held >= this.limit) {
      throw tooManyStreams(
        `This instance already runs ${this.limit} imports (IMPORTS_IN_FLIGHT); retry when one ends`,
      );
    }
    const mine = this.byOrganization.get(organizationId) ?? 0;
    if (mine >= this.perOrganization) {
      throw tooManyStreams(
        `This instance already runs ${mine} imports of the organization (half of IMPORTS_IN_FLIGHT); retry when one ends`,
      );
    }
    this.held++;
    this.byOrganization.set(organizationId, mine + 1);
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.held--;
      const left = (this.byOrganization.get(organizationId) ?? 1) - 1;
      if (left > 0) this.byOrganization.set(organizationId, left);
      else this.byOrganization.delete(organizationId);
    };
  }

  /** Imports running now (tests and metrics). */
  get inFlight(): number {
    return this.held;
  }
}

/**
 * Takes an import slot before the body is read, and gives it back once the import is answered:
 * its document received, checked and written, or refused. Runs after the guards, so a request
 * refused by them takes no slot.
 */
@Injectable()
export class ImportSlotInterceptor implements NestInterceptor {
  constructor(private readonly slots: ImportSlots) {}

  intercept(context: ExecutionContext, next: CallHandler): Observable<unknown> {
    const request = context.switchToHttp().getRequest<RequestWithCaller>();
    const organizationId = organizationOf(request, 'an import slot');
    return defer(() => {
      const release = this.slots.take(organizationId);
      return next.handle().pipe(finalize(release));
    });
  }
}

/** On the import's handler, below @ReadsDocumentBody() so that the slot is taken first. */
export const TakesImportSlot = (): MethodDecorator => UseInterceptors(ImportSlotInterceptor);
