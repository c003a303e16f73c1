import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Clock } from '../common/time/clock';
import { type BackgroundJob, BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import type { WebhooksConfig } from '../config/webhooks.config';
import { MetricsService } from '../metrics/metrics.service';
import { publicEventId } from './webhook-event-types';
import { sendWebhook } from './webhook-sender';
import { signatureHeaders } from './webhook-signer';
import { portProblem } from './webhook-url';
import {
  type AttemptOutcome,
  type ClaimedAttempt,
  WebhooksRepository,
} from './webhooks.repository';

/**
 * How long a claim outlives the attempt's own timeout: an instance that has not recorded an
 * outcome by then is taken for dead, and the attempt is due again for any instance. Generous,
 * because a live instance whose lease ran out would make the attempt twice.
 */
const LEASE_MARGIN_MS = 30_000;
/** At shutdown, in-flight attempts get this long (at most their timeout) before being cut off and handed back. */
const SHUTDOWN_GRACE_MS = 5_000;
/** The longest wait between two attempts, however large the base and the attempt number. */
const MAX_BACKOFF_MS = 7 * 86_400_000;
/** Events (and their attempts) are kept this long once every attempt is made. */
const RETENTION_DAYS = 30;
const PURGE_INTERVAL_MS = 3_600_000;
const PURGE_BATCH = 1_000;
/** The poll interval while claims find work (the idle one is WEBHOOK_POLL_INTERVAL_MS). */
const BUSY_POLL_INTERVAL_MS = 50;
/** Outcomes recorded per statement at most. */
const RECORD_BATCH = 500;

/**
 * Wait before attempt `attempt + 1`: the base, doubled for each attempt already made, plus up to
 * 10 % of jitter so that endpoints failing together are not retried in lockstep.
 */
export function backoffMs(attempt: number, baseMs: number, random = Math.random()): number {
  const exponential = baseMs * 2 ** (attempt - 1);
  return Math.round(Math.min(exponential * (1 + 0.1 * random), MAX_BACKOFF_MS));
}

/** The body of an event, as every attempt sends it. */
export function eventBody(
  job: Pick<
    ClaimedAttempt,
    'event_id' | 'event_type' | 'event_created_at' | 'organization_id' | 'data'
  >,
): string {
  return JSON.stringify({
    id: publicEventId(job.event_id),
    type: job.event_type,
    created_at: job.event_created_at.toISOString(),
    organization_id: job.organization_id,
    data: job.data,
  });
}

/**
 * Delivers the outbox, on every instance. A loop claims due attempts (a short statement with FOR
 * UPDATE SKIP LOCKED and a lease, so each attempt is made by one instance), makes them with no
 * transaction or connection held during the HTTP call, and records the outcomes in batches,
 * scheduling the next attempt of a failed one in the same statement. The queue is the table, so
 * a restart loses nothing; an instance that dies mid-attempt leaves a lease that runs out.
 */
@Injectable()
export class WebhookDeliveryWorker implements BackgroundJob {
  private readonly config: WebhooksConfig;
  private readonly leaseMs: number;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly toRecord: AttemptOutcome[] = [];
  private readonly toRelease: Array<{ id: string; lockToken: string }> = [];
  private readonly abort = new AbortController();
  private recording: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private waitingForSlot = false;
  private stopped = false;
  private readonly purge: PeriodicTask;

  constructor(
    private readonly webhooks: WebhooksRepository,
    config: ConfigService,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(WebhookDeliveryWorker.name);
    jobs.add(this);
    this.purge = jobs.periodic({
      intervalMs: PURGE_INTERVAL_MS,
      firstDelayMs: 60_000,
      run: () => this.purgeOld(),
      onError: (error) => this.logger.error({ err: error }, 'webhook event purge failed'),
    });
    this.config = config.getOrThrow<WebhooksConfig>('webhooks');
    this.leaseMs = this.config.timeoutMs + LEASE_MARGIN_MS;
    // Every attempt in flight listens to it.
    setMaxListeners(this.config.concurrency + 10, this.abort.signal);
    const countPending = () =>
      this.webhooks.countPending().catch((error: unknown) => {
        this.logger.warn({ err: error }, 'webhook_deliveries_pending: count failed');
        return undefined;
      });
    metrics.gauge({
      name: 'webhook_deliveries_pending',
      help: 'Webhook delivery attempts not made yet (due, scheduled or in flight); database-wide',
      async collect() {
        // A failed count leaves the last value rather than failing the whole scrape.
        const pending = await countPending();
        if (pending !== undefined) this.set(pending);
      },
    });
  }

  start(): void {
    this.loop = this.run();
  }

  /**
   * Before the database closes: stop claiming, give in-flight attempts a short grace, cut off the
   * rest and hand them back (due again at once, for another instance), record every outcome.
   */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake?.();
    await this.loop;
    const grace = Math.min(this.config.timeoutMs, SHUTDOWN_GRACE_MS);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.all(this.inFlight.values()),
      new Promise((resolve) => (timer = setTimeout(resolve, grace))),
    ]);
    clearTimeout(timer);
    this.abort.abort();
    await Promise.all(this.inFlight.values());
    while (this.recording) await this.recording;
    if (this.toRelease.length > 0) {
      await this.webhooks
        .release(this.toRelease.splice(0))
        .catch((error: unknown) =>
          this.logger.warn({ err: error }, 'releasing webhook attempts failed'),
        );
    }
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const free = this.config.concurrency - this.inFlight.size;
      let claimed = 0;
      if (free > 0) {
        try {
          const jobs = await this.webhooks.claimDue(
            free,
            this.leaseMs,
            randomUUID(),
            this.clock.now(),
          );
          claimed = jobs.length;
          for (const job of jobs) this.startAttempt(job);
        } catch (error) {
          this.logger.error({ err: error }, 'claiming webhook attempts failed; retrying');
        }
      }
      if (this.stopped) break;
      // A full batch: more may be due at once.
      if (free > 0 && claimed === free) continue;
      // Found work: events are flowing, look again soon; found none: the idle interval.
      const interval =
        claimed > 0
          ? Math.min(BUSY_POLL_INTERVAL_MS, this.config.pollIntervalMs)
          : this.config.pollIntervalMs;
      await this.pause(free > 0 ? interval : undefined);
    }
  }

  /** Sleeps for `ms`, or, without it, until a quarter of the slots are free; stop wakes it. */
  private pause(ms: number | undefined): Promise<void> {
    return new Promise<void>((resolve) => {
      let timer: NodeJS.Timeout | undefined;
      const done = () => {
        clearTimeout(timer);
        this.wake = undefined;
        this.waitingForSlot = false;
        resolve();
      };
      if (ms !== undefined) timer = setTimeout(done, ms);
      this.waitingForSlot = ms === undefined;
      this.wake = done;
    });
  }

  private startAttempt(job: ClaimedAttempt): void {
    const delivery = this.deliver(job)
      .catch((error: unknown) =>
        // Unrecorded: the lease runs out and the attempt is made again.
        this.logger.error({ err: error, attemptId: job.id }, 'webhook attempt failed unexpectedly'),
      )
      .finally(() => {
        this.inFlight.delete(job.id);
        if (this.waitingForSlot && this.inFlight.size <= (this.config.concurrency * 3) / 4) {
          this.wake?.();
        }
      });
    this.inFlight.set(job.id, delivery);
  }

  private async deliver(job: ClaimedAttempt): Promise<void> {
    if (job.endpoint_status !== 'enabled') {
      this.record({
        id: job.id,
        lockToken: job.lock_token,
        status: 'failed',
        responseStatus: null,
        error: 'endpoint disabled',
        durationMs: null,
        retryInMs: null,
      });
      return;
    }
    const badPort = URL.canParse(job.url)
      ? portProblem(new URL(job.url), this.config.allowedPorts)
      : 'invalid URL';
    if (badPort) {
      // An endpoint stored before the port rule (or before WEBHOOK_ALLOWED_PORTS narrowed).
      this.record({
        id: job.id,
        lockToken: job.lock_token,
        status: 'failed',
        responseStatus: null,
        error: badPort,
        durationMs: null,
        retryInMs:
          job.attempt < this.config.maxAttempts
            ? backoffMs(job.attempt, this.config.retryBaseMs)
            : null,
      });
      return;
    }
    const body = eventBody(job);
    const headers = signatureHeaders(
      job.secret,
      publicEventId(job.event_id),
      Math.floor(this.clock.nowMs() / 1000),
      body,
    );
    const result = await sendWebhook(job.url, body, headers, {
      timeoutMs: this.config.timeoutMs,
      allowPrivateUrls: this.config.allowPrivateUrls,
      signal: this.abort.signal,
    });
    if (result.kind === 'aborted') {
      this.toRelease.push({ id: job.id, lockToken: job.lock_token });
      return;
    }
    const succeeded = result.kind === 'response' && result.status >= 200 && result.status < 300;
    const retry = !succeeded && job.attempt < this.config.maxAttempts;
    this.record({
      id: job.id,
      lockToken: job.lock_token,
      status: succeeded ? 'succeeded' : 'failed',
      responseStatus: result.kind === 'response' ? result.status : null,
      error: succeeded ? null : errorOf(result),
      durationMs: result.durationMs,
      retryInMs: retry ? backoffMs(job.attempt, this.config.retryBaseMs) : null,
    });
  }

  /**
   * Queues the outcome for the recorder, which writes whatever queued meanwhile in one statement.
   * The attempt's slot is free at once: the row stays claimed (its lease) until it is recorded,
   * so a slow database slows recording, not sending.
   */
  private record(outcome: AttemptOutcome): void {
    this.toRecord.push(outcome);
    this.flush();
  }

  private flush(): void {
    if (this.recording) return;
    this.recording = (async () => {
      while (this.toRecord.length > 0) {
        const batch = this.toRecord.splice(0, RECORD_BATCH);
        try {
          await this.webhooks.recordOutcomes(batch, this.clock.now());
        } catch (error) {
          // Unrecorded attempts stay claimed until their lease runs out, then are made again.
          this.logger.error(
            { err: error, count: batch.length },
            'recording webhook attempts failed',
          );
        }
      }
    })().finally(() => {
      this.recording = undefined;
      if (this.toRecord.length > 0) this.flush();
    });
  }

  private async purgeOld(): Promise<void> {
    const cutoff = new Date(this.clock.nowMs() - RETENTION_DAYS * 86_400_000);
    const total = await inBatches(
      PURGE_BATCH,
      () => this.webhooks.deleteEventsCreatedBefore(cutoff, PURGE_BATCH),
      () => this.purge.isStopped,
    );
    if (total > 0) this.logger.info({ count: total }, 'purged webhook events past retention');
  }
}

function errorOf(
  result: { kind: 'response'; status: number } | { kind: 'error'; error: string },
): string {
  if (result.kind === 'error') return result.error;
  if (result.status >= 300 && result.status < 400) {
    return `answered ${result.status}; redirects are not followed`;
  }
  return `answered ${result.status}`;
}
