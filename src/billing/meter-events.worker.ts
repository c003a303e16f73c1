import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { Clock } from '../common/time/clock';
import { BackgroundJobs } from '../common/time/background-jobs';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { billingConfig } from '../config/billing.config';
import { MetricsService } from '../metrics/metrics.service';
import {
  type ClaimedMeterEvent,
  METER_EVENT_MAX_AGE_MS,
  MeterEventsRepository,
} from './meter-events.repository';
import { StripeGateway } from './stripe-gateway';

/** Events claimed per statement, and sent at once at most. */
const BATCH = 100;
const CONCURRENCY = 16;
/** The longest wait between two attempts of one event. */
const MAX_BACKOFF_MS = 3_600_000;
/** A claim outlives Stripe's own deadline by this much before another instance may take it. */
const LEASE_MARGIN_MS = 30_000;
/**
 * An hour's tokens are sent this long after the hour is over: a reply whose statement began in
 * the hour (its time was read then) has committed by then.
 */
export const TOKEN_HOUR_GRACE_MS = 120_000;
const PURGE_AFTER_MS = 90 * 86_400_000;
const PURGE_INTERVAL_MS = 3_600_000;

/** Wait before attempt `attempt + 1`: doubling from the base, up to an hour, with 10 % jitter. */
export function meterBackoffMs(attempt: number, baseMs: number, random = Math.random()): number {
  const exponential = baseMs * 2 ** Math.min(attempt - 1, 30);
  return Math.round(Math.min(exponential, MAX_BACKOFF_MS) * (1 + 0.1 * random));
}

/**
 * Sends the meter events outbox to Stripe (`billing.meterEvents.create`), on every instance, with
 * retries: a claim (SKIP LOCKED and a lease) gives each attempt to one instance; a failed attempt
 * is due again after a backoff, for as long as Stripe takes the event's timestamp (35 days);
 * a delivered event is never sent again. Every attempt carries the event's identifier and an
 * idempotency key derived from it, so an attempt whose answer was lost counts once at Stripe.
 * With STRIPE_TOKEN_METER_EVENT_NAME, it first turns the hours that are over into events.
 */
@Injectable()
export class MeterEventsWorker {
  private readonly leaseMs: number;
  private readonly task: PeriodicTask;
  private readonly purge: PeriodicTask;

  constructor(
    private readonly events: MeterEventsRepository,
    private readonly stripe: StripeGateway,
    @Inject(billingConfig.KEY) private readonly config: ConfigType<typeof billingConfig>,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(MeterEventsWorker.name);
    this.leaseMs = this.config.timeoutMs + LEASE_MARGIN_MS;
    this.task = jobs.periodic({
      intervalMs: this.config.meterPollIntervalMs,
      run: () => this.sendDue(),
      onError: (error) => this.logger.error({ err: error }, 'meter events: a run failed'),
    });
    this.purge = jobs.periodic({
      intervalMs: PURGE_INTERVAL_MS,
      firstDelayMs: 60_000,
      run: () => this.purgeOld(),
      onError: (error) => this.logger.error({ err: error }, 'meter events: purge failed'),
    });
    const countPending = () => this.events.countAllPending().catch(() => undefined);
    metrics.gauge({
      name: 'meter_events_pending',
      help: 'Stripe meter events not delivered yet (due or waiting for a retry); database-wide',
      async collect() {
        const pending = await countPending();
        if (pending !== undefined) this.set(pending);
      },
    });
  }

  private get enabled(): boolean {
    return (
      this.stripe.configured &&
      (this.config.meterEventName !== undefined || this.config.tokenMeterEventName !== undefined)
    );
  }

  /** A run now, never beside this instance's scheduled one (a spec's or an operator's). */
  runOnce(): Promise<void> {
    return this.task.exclusive(() => this.sendDue());
  }

  /** Seals the hours that are over, then sends every due event. */
  private async sendDue(): Promise<void> {
    if (!this.enabled) return;
    if (this.config.tokenMeterEventName) await this.sealHours(this.config.tokenMeterEventName);
    while (!this.task.isStopped) {
      const claimed = await this.events.claimDue(
        BATCH,
        this.leaseMs,
        randomUUID(),
        this.clock.now(),
      );
      if (claimed.length === 0) return;
      await this.sendAll(claimed);
      if (claimed.length < BATCH) return;
    }
  }

  private async sealHours(eventName: string): Promise<void> {
    const now = this.clock.now();
    const before = new Date(now.getTime() - TOKEN_HOUR_GRACE_MS - 3_600_000);
    // Hours whose end (hour + 1 h) is at least the grace in the past.
    await inBatches(
      BATCH,
      () => this.events.sealHoursBefore(before, eventName, now, BATCH),
      () => this.task.isStopped,
    );
  }

  private async sendAll(claimed: ClaimedMeterEvent[]): Promise<void> {
    let next = 0;
    const lane = async () => {
      while (next < claimed.length) await this.send(claimed[next++]);
    };
    await Promise.all(Array.from({ length: Math.min(CONCURRENCY, claimed.length) }, lane));
  }

  private async send(event: ClaimedMeterEvent): Promise<void> {
    const lockToken = event.lock_token!;
    const tooOld = this.clock.nowMs() - event.occurred_at.getTime() > METER_EVENT_MAX_AGE_MS;
    if (tooOld) {
      await this.events.failed(
        event.id,
        lockToken,
        'older than Stripe takes',
        this.clock.now(),
        true,
      );
      this.logger.error(
        { identifier: event.identifier, occurredAt: event.occurred_at.toISOString() },
        'meter event expired before Stripe took it',
      );
      return;
    }
    try {
      await this.stripe.call('billing.meterEvents.create', (stripe) =>
        stripe.billing.meterEvents.create(
          {
            event_name: event.event_name,
            payload: { stripe_customer_id: event.stripe_customer_id, value: String(event.value) },
            identifier: event.identifier,
            timestamp: Math.floor(event.occurred_at.getTime() / 1000),
          },
          { idempotencyKey: `meter-event:${event.identifier}` },
        ),
      );
      await this.events.delivered(event.id, lockToken, this.clock.now());
    } catch (error) {
      const retryAt = new Date(
        this.clock.nowMs() + meterBackoffMs(event.attempts, this.config.meterRetryBaseMs),
      );
      await this.events.failed(
        event.id,
        lockToken,
        error instanceof Error ? error.message : String(error),
        retryAt,
        false,
      );
    }
  }

  private async purgeOld(): Promise<void> {
    const cutoff = new Date(this.clock.nowMs() - PURGE_AFTER_MS);
    await inBatches(
      1_000,
      () => this.events.deleteDoneBefore(cutoff, 1_000),
      () => this.purge.isStopped,
    );
  }
}
