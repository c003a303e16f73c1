import { Inject, Injectable } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { type HttpConfig, httpConfig } from '../../config/http.config';
import { AppError } from '../errors/app-error';
import { onResponseDone } from '../http/response-done';

/** What a client refused a stream is told to wait before trying again. */
const RETRY_AFTER_SECONDS = 5;

/** 429 `too_many_streams`, with the Retry-After every refusal of a long response carries. */
export function tooManyStreams(message: string): AppError {
  return new AppError('too_many_streams', message, {
    headers: { 'Retry-After': String(RETRY_AFTER_SECONDS) },
  });
}

/**
 * Long responses (exports, subject access, streamed replies) take a slot of their organization:
 * at most STREAMS_PER_ORG at once per instance, so one tenant's stalled readers cannot take the
 * capacity others need. A stream whose client reads nothing for STREAM_IDLE_TIMEOUT_MS is cut.
 */
@Injectable()
export class StreamSlots {
  private readonly open = new Map<string, number>();
  private readonly limit: number;
  /** How long a stream's client may read nothing before the stream is ended. */
  readonly idleTimeoutMs: number;

  constructor(@Inject(httpConfig.KEY) http: HttpConfig) {
    this.limit = http.streamsPerOrganization;
    this.idleTimeoutMs = http.streamIdleTimeoutMs;
  }

  /**
   * Takes a slot for the response, or throws 429 `too_many_streams`. The slot is given back when
   * the response is done, whether it finished, failed or its client went away (before this call
   * included).
   */
  take(organizationId: string, response: ServerResponse): void {
    const held = this.open.get(organizationId) ?? 0;
    if (held >= this.limit) {
      throw tooManyStreams(
        `This organization already has ${this.limit} exports or streams open; retry when one ends`,
      );
    }
    this.open.set(organizationId, held + 1);
    onResponseDone(response, () => {
      const left = (this.open.get(organizationId) ?? 1) - 1;
      if (left > 0) this.open.set(organizationId, left);
      else this.open.delete(organizationId);
    });
    // Socket inactivity: once the client stops reading, the kernel buffers fill and writes stop.
    // Node resets the socket's timeout to the keep-alive one when the response finishes.
    response.setTimeout(this.idleTimeoutMs, () => response.destroy());
  }

  /** Streams open now for the organization (tests and metrics). */
  heldBy(organizationId: string): number {
    return this.open.get(organizationId) ?? 0;
  }
}
