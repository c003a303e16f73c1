import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { Clock } from '../common/time/clock';
import { type BackgroundJob, BackgroundJobs } from '../common/time/background-jobs';
import { DatabaseOutage } from '../common/time/database-outage';
import { inBatches, type PeriodicTask } from '../common/time/periodic-task';
import { webhooksConfig } from '../config/webhooks.config';
import { MetricsService } from '../metrics/metrics.service';
import { publicEventId } from './webhook-event-types';
import { sendWebhook } from './webhook-sender';
import { signatureHeaders } from './webhook-signer';
import { portProblem } from './webhook-url';
import {
  type AttemptOutcome,
  type ClaimedAttempt,
  type ClaimResult,
  WebhooksRepository,
} from './webhooks.repository';

/**
 * How long a claim outlives the attempt's own wait and timeout: an instance that has not recorded
 * an outcome by then is taken for dead, and the attempt is due again for any instance. Generous,
 * because a live instance whose lease ran out would make the attempt twice.
 */
const LEASE_MARGIN_MS = 30_000;
/**
 * An instance holds up to this many times its in-flight caps (per organization, per endpoint,
 * in all): the attempts beyond them wait in memory for a slot of theirs, so that a slot that
 * frees is used at once rather than after a claim's round trip, and a claim fetches a batch. A
 * claim is made for a capped organization or endpoint once it holds half of this or less. An
 * attempt that has waited a whole timeout for its slot (its endpoint hangs) is handed back.
 */
const HOLD_FACTOR = 4;
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
/** Attempts one endpoint has in flight on one instance at most (contract §25). */
export const ENDPOINT_CONCURRENCY = 4;
/**
 * The slots of all the organizations one user made together, in organizations' caps: one user's
 * nine organizations of hanging endpoints no longer hold every slot (found by review), and one
 * of them hanging leaves its siblings a whole organization's share (at one, it held all of it:
 * review of the change).
 */
const ACCOUNT_SHARE = 2;
/** Endpoints one claim visits at most; the next claim goes on from where it stopped. */
const ENDPOINTS_PER_CLAIM = 256;

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
  private readonly leaseMs: number;
  private readonly inFlight = new Map<string, Promise<void>>();
  /** Claimed, waiting for a slot of their account, organization and endpoint (claim order). */
  private readonly queued: Array<ClaimedAttempt & { queuedAt: number }> = [];
  /** In flight, by account, organization and endpoint: the fairness caps apply to these. */
  private readonly sending = {
    accounts: new Map<string, number>(),
    organizations: new Map<string, number>(),
    endpoints: new Map<string, number>(),
  };
  /** In flight or queued, by account, organization and endpoint: what claims count. */
  private readonly held = {
    accounts: new Map<string, number>(),
    organizations: new Map<string, number>(),
    endpoints: new Map<string, number>(),
  };
  private readonly perAccount: number;
  private readonly perOrganization: number;
  private readonly perEndpoint: number;
  /** Where the next claim's visit of the endpoints starts (null: from the first). */
  private cursor: string | null = null;
  /** Accounts, organizations and endpoints whose own cap kept due attempts back at the last claim. */
  private heldBack: ClaimResult['heldBack'] = {
    endpoints: new Set(),
    organizations: new Set(),
    accounts: new Set(),
  };
  /** Attempts that ended while a claim ran: its counts were stale. */
  private endedWhileClaiming: ClaimedAttempt[] | undefined;
  private readonly toRecord: AttemptOutcome[] = [];
  private readonly toRelease: Array<{ id: string; lockToken: string }> = [];
  private readonly abort = new AbortController();
  private recording: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  private wake: (() => void) | undefined;
  private waitingForSlot = false;
  private stopped = false;
  /** The claims meeting a database out of reach: reported once a minute, spaced out. */
  private readonly outage = new DatabaseOutage();
  private readonly purge: PeriodicTask;

  constructor(
    private readonly webhooks: WebhooksRepository,
    @Inject(webhooksConfig.KEY) private readonly config: ConfigType<typeof webhooksConfig>,
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
    // Queued for at most a timeout (and a loop's pause before it is noticed), then made within
    // another timeout.
    this.leaseMs = 2 * this.config.timeoutMs + this.config.pollIntervalMs + LEASE_MARGIN_MS;
    this.perOrganization = this.config.concurrencyPerOrganization;
    this.perAccount = ACCOUNT_SHARE * this.perOrganization;
    this.perEndpoint = Math.min(ENDPOINT_CONCURRENCY, this.perOrganization);
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
    // Claimed but never started: handed back as they are.
    for (const job of this.queued.splice(0)) {
      this.toRelease.push({ id: job.id, lockToken: job.lock_token });
    }
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

  /** Attempts this instance holds at most: in flight and queued. */
  private get holdLimit(): number {
    return HOLD_FACTOR * this.config.concurrency;
  }

  private get holding(): number {
    return this.inFlight.size + this.queued.length;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      const free = this.holdLimit - this.holding;
      let claimed = 0;
      let slotFreedForHeldBack = false;
      await this.handBackStale();
      if (free > 0) {
        this.endedWhileClaiming = [];
        try {
          const { attempts, cursor, heldBack } = await this.webhooks.claimDue(
            {
              limit: free,
              perAccount: HOLD_FACTOR * this.perAccount,
              perOrganization: HOLD_FACTOR * this.perOrganization,
              perEndpoint: HOLD_FACTOR * this.perEndpoint,
              busyAccounts: this.held.accounts,
              busyOrganizations: this.held.organizations,
              busyEndpoints: this.held.endpoints,
              endpointsPerClaim: ENDPOINTS_PER_CLAIM,
              cursor: this.cursor,
            },
            this.leaseMs,
            randomUUID(),
            this.clock.now(),
          );
          this.cursor = cursor;
          this.heldBack = heldBack;
          claimed = attempts.length;
          this.outage.succeeded();
          for (const job of attempts) this.hold(job);
          this.startQueued();
          slotFreedForHeldBack = this.endedWhileClaiming.some((job) => this.isHeldBack(job));
        } catch (error) {
          if (this.outage.failed(error)) {
            this.logger.error({ err: error }, 'claiming webhook attempts failed; retrying');
          }
        } finally {
          this.endedWhileClaiming = undefined;
        }
      }
      if (this.stopped) break;
      // A full batch: more may be due at once. A slot freed, while the claim ran, where a cap
      // kept due work back: that work may be taken now.
      if (free > 0 && (claimed === free || slotFreedForHeldBack)) continue;
      // Found work: events are flowing, look again soon; found none: the idle interval. An
      // attempt ending where a cap kept work back wakes the loop earlier.
      const interval =
        claimed > 0
          ? Math.min(BUSY_POLL_INTERVAL_MS, this.config.pollIntervalMs)
          : this.config.pollIntervalMs;
      await this.pause(free > 0 ? this.outage.delayMs(interval) : undefined);
    }
  }

  /**
   * Whether a claim now would find work of the ended attempt's account, organization or
   * endpoint: its cap kept due attempts back at the last claim, and its queue here has run down
   * to one round of slots (so a claim takes a batch, not one attempt per attempt that ends). Its
   * account too, whichever cap it was: an organization or endpoint run down in an account that
   * has not would have its claim cut by the account's cap.
   */
  private isHeldBack(job: ClaimedAttempt): boolean {
    const runDown = (held: Map<string, number>, key: string, cap: number) =>
      (held.get(key) ?? 0) <= (HOLD_FACTOR / 2) * cap;
    return (
      runDown(this.held.accounts, job.account, this.perAccount) &&
      (this.heldBack.accounts.has(job.account) ||
        (this.heldBack.organizations.has(job.organization_id) &&
          runDown(this.held.organizations, job.organization_id, this.perOrganization)) ||
        (this.heldBack.endpoints.has(job.endpoint_id) &&
          runDown(this.held.endpoints, job.endpoint_id, this.perEndpoint)))
    );
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

  private hold(job: ClaimedAttempt): void {
    count(this.held.accounts, job.account, +1);
    count(this.held.organizations, job.organization_id, +1);
    count(this.held.endpoints, job.endpoint_id, +1);
    this.queued.push({ ...job, queuedAt: performance.now() });
  }

  /** Counts `job` out of what this instance holds. */
  private letGo(job: ClaimedAttempt): void {
    count(this.held.accounts, job.account, -1);
    count(this.held.organizations, job.organization_id, -1);
    count(this.held.endpoints, job.endpoint_id, -1);
  }

  /**
   * Hands back the queued attempts that have waited a whole timeout for a slot (their endpoint
   * or organization hangs): due again at once, for any instance, within their lease.
   */
  private async handBackStale(): Promise<void> {
    const cutoff = performance.now() - this.config.timeoutMs;
    const stale = this.queued.filter((job) => job.queuedAt <= cutoff);
    if (stale.length === 0) return;
    for (const job of stale) {
      this.queued.splice(this.queued.indexOf(job), 1);
      this.letGo(job);
    }
    await this.webhooks
      .release(stale.map((job) => ({ id: job.id, lockToken: job.lock_token })))
      .catch((error: unknown) =>
        // Their leases run out instead.
        this.logger.warn({ err: error }, 'handing back queued webhook attempts failed'),
      );
  }

  /**
   * Starts the queued attempts that have a slot (in all, of their account, of their organization,
   * of their endpoint), in the order they were claimed; the others keep waiting.
   */
  private startQueued(): void {
    for (let i = 0; i < this.queued.length && this.inFlight.size < this.config.concurrency;) {
      const job = this.queued[i];
      if (
        (this.sending.accounts.get(job.account) ?? 0) < this.perAccount &&
        (this.sending.organizations.get(job.organization_id) ?? 0) < this.perOrganization &&
        (this.sending.endpoints.get(job.endpoint_id) ?? 0) < this.perEndpoint
      ) {
        this.queued.splice(i, 1);
        this.startAttempt(job, { waited: true });
      } else {
        i += 1;
      }
    }
  }

  /**
   * Sends the attempt. One that `waited` in the queue for a slot first reads its endpoint again:
   * a disable, a deletion or a new URL or secret since the claim counts (found by review: up to
   * a timeout later, queued attempts went to the endpoint as it was when claimed).
   */
  private startAttempt(job: ClaimedAttempt, { waited = false } = {}): void {
    count(this.sending.accounts, job.account, +1);
    count(this.sending.organizations, job.organization_id, +1);
    count(this.sending.endpoints, job.endpoint_id, +1);
    const delivery = (waited ? this.withEndpointNow(job) : Promise.resolve(job))
      .then(async (current) => {
        if (current) await this.deliver(current);
      })
      .catch((error: unknown) =>
        // Unrecorded: the lease runs out and the attempt is made again.
        this.logger.error({ err: error, attemptId: job.id }, 'webhook attempt failed unexpectedly'),
      )
      .finally(() => {
        this.inFlight.delete(job.id);
        count(this.sending.accounts, job.account, -1);
        count(this.sending.organizations, job.organization_id, -1);
        count(this.sending.endpoints, job.endpoint_id, -1);
        this.letGo(job);
        // A slot of this organization and endpoint is free: a queued attempt may take it.
        if (!this.stopped) this.startQueued();
        if (this.endedWhileClaiming) {
          this.endedWhileClaiming.push(job);
        } else if (this.waitingForSlot) {
          if (this.holding <= (this.holdLimit * 3) / 4) this.wake?.();
        } else if (this.isHeldBack(job)) {
          this.wake?.();
        }
      });
    this.inFlight.set(job.id, delivery);
  }

  /** The attempt, its endpoint as it is now; null once the endpoint (and so the attempt) is gone. */
  private async withEndpointNow(job: ClaimedAttempt): Promise<ClaimedAttempt | null> {
    const target = await this.webhooks.deliveryTarget(job.organization_id, job.endpoint_id);
    return target ? { ...job, ...target } : null;
  }

  private async deliver(job: ClaimedAttempt): Promise<void> {
    if (job.endpoint_status !== 'enabled') {
      this.record({
        id: job.id,
        lockToken: job.lock_token,
        endpointId: job.endpoint_id,
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
        endpointId: job.endpoint_id,
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
      endpointId: job.endpoint_id,
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

/** Adds `by` to the count of `key` (a count of 0 is no entry). */
function count(counts: Map<string, number>, key: string, by: number): void {
  const next = (counts.get(key) ?? 0) + by;
  if (next <= 0) counts.delete(key);
  else counts.set(key, next);
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
