import { CallHandler, Inject, Injectable, NestInterceptor, UseInterceptors } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { defer, finalize, type Observable } from 'rxjs';
import { tooManyStreams } from '../common/streams/stream-slots.service';
import { memoryConfig } from '../config/memory.config';

/**
 * The imports this instance runs at once: at most IMPORTS_IN_FLIGHT (contract §29), each holding
 * its document in a temporary file of up to IMPORT_MAX_BYTES and a few megabytes of memory.
 */
@Injectable()
export class ImportSlots {
  private held = 0;
  private readonly limit: number;

  constructor(@Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>) {
    this.limit = memory.importsInFlight;
  }

  /** Takes a slot, or throws 429 `too_many_streams`; the answer gives it back, once. */
  take(): () => void {
    if (this.held >= this.limit) {
      throw tooManyStreams(
        `This instance already runs ${this.limit} imports (IMPORTS_IN_FLIGHT); retry when one ends`,
      );
    }
    this.held++;
    let given = false;
    return () => {
      if (given) return;
      given = true;
      this.held--;
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

  intercept(_context: unknown, next: CallHandler): Observable<unknown> {
    return defer(() => {
      const release = this.slots.take();
      return next.handle().pipe(finalize(release));
    });
  }
}

/** On the import's handler, below @ReadsDocumentBody() so that the slot is taken first. */
export const TakesImportSlot = (): MethodDecorator => UseInterceptors(ImportSlotInterceptor);
