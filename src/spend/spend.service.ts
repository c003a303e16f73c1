import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { relationshipMeterEventStep, tokenHourStep } from '../billing/meter-events.step';
import { AppError } from '../common/errors/app-error';
import { BackgroundJobs } from '../common/time/background-jobs';
import { Clock } from '../common/time/clock';
import type { PeriodicPurge } from '../common/time/periodic-purge';
import { nextUtcDay, utcDay } from '../common/time/utc-day';
import { billingConfig } from '../config/billing.config';
import { engineConfig } from '../config/engine.config';
import { type Source, sql, type WithEntry } from '../database/sql';
import { MAX_TOOL_TIMEOUT_MS } from '../tools/tool-definitions';
import type { MonthTokensColumns, NewRelationshipColumns } from '../usage/usage.steps';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import { type AppliedLimits, LimitsService } from './limits.service';
import { type HeldReservation, reservationReleaseStep } from './reservation-release.step';
import { SpendReservationsRepository } from './spend-reservations.repository';
import { tokensAtMost } from './token-bound';
import { usageThresholdStep } from './usage-threshold.step';

/**
 * Tokens a reply is taken to cost before it is made: a token per UTF-8 byte of its prompt (the
 * whole system message and the emotion names: promptTextsOf; tokensAtMost, the bound no text
 * exceeds), plus PROMPT_OVERHEAD_TOKENS for the reply format's fixed schema and the messages'
 * framing, plus ENGINE_MAX_TOKENS (the cap the provider is sent for the reply itself). The excess
 * is given back when the reply settles.
 */
export const PROMPT_OVERHEAD_TOKENS = 512;
/**
 * A hold outlives the longest stretch until it is made again by this much, then lapses. That
 * stretch is a model call (ENGINE_TIMEOUT_MS), then, in a turn with tools, its round's webhook
 * calls (called together, each within its `timeout_ms`) and their arguments' checks, before the
 * next call's hold replaces it: with ENGINE_TIMEOUT_MS + 30 s alone a round of 30 s tools let the
 * hold lapse just before it was made again (found by review).
 */
const RESERVATION_MARGIN_MS = 30_000;
/** How often reservations that lapsed (their instance died) are deleted. */
const PURGE_INTERVAL_MS = 60_000;
const PURGE_BATCH_SIZE = 1_000;

/** What admit() decided for a reply: the limits it met and what it reserved. */
export interface SpendAdmission {
  organizationId: string;
  limits: AppliedLimits;
  /** Null: no budget, or nothing to hold (the local engine). */
  reservation: HeldReservation | null;
  /** Settled by the reply's statement or given back: nothing more to release. */
  released: boolean;
}

/** What exchangeSteps() reads of the reply's statement: its lent sources and the reply's tokens. */
interface Exchange {
  at: Date;
  relationship: Source<NewRelationshipColumns>;
  /** The month's token counts after this reply; null when the engine reported no usage. */
  tokens: Source<MonthTokensColumns> | null;
  /** The reply's prompt + completion tokens (0 without usage). */
  tokensUsed: number;
}

const firstOfNextMonth = (at: Date) =>
  new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));

/**
 * Spend control for /v1/respond (docs/spend-control.md): before the provider is asked, a reply
 * is admitted against the organization's monthly and the end user's daily token budget, with an
 * estimate of its cost reserved in PostgreSQL (shared by every instance, with or without Redis)
 * until the reply's statement swaps it for its tokens; that statement also carries the
 * thresholds reached and the meter events.
 */
@Injectable()
export class SpendService {
  private readonly reservationTtlMs: number;
  private readonly lapsed: PeriodicPurge;

  constructor(
    @Inject(engineConfig.KEY) private readonly engine: ConfigType<typeof engineConfig>,
    @Inject(billingConfig.KEY) private readonly billing: ConfigType<typeof billingConfig>,
    private readonly limits: LimitsService,
    private readonly reservations: SpendReservationsRepository,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
    jobs: BackgroundJobs,
  ) {
    this.logger.setContext(SpendService.name);
    this.reservationTtlMs = this.engine.timeoutMs + MAX_TOOL_TIMEOUT_MS + RESERVATION_MARGIN_MS;
    this.lapsed = jobs.purge({
      what: 'lapsed spend reservations',
      intervalMs: PURGE_INTERVAL_MS,
      batchSize: PURGE_BATCH_SIZE,
      now: () => clock.now(),
      deleteBatch: (now, batchSize) => reservations.deleteExpired(now, batchSize),
      logger,
    });
  }

  /** The estimate of a reply whose prompt carries these texts (0 for the local engine). */
  estimate(promptTexts: readonly string[]): number {
    if (this.engine.engine === 'local') return 0;
    return promptTokensOf(promptTexts) + PROMPT_OVERHEAD_TOKENS + this.engine.maxTokens;
  }

  /**
   * Admits a reply or refuses it with 402 `budget_exceeded` before anything is asked of the
   * provider. With a budget, the reply's estimate is reserved until its statement settles it (or
   * release()): a budget is then overshot by at most what the last reply admitted spends beyond
   * the room it found, whatever the number of instances and whatever Redis does.
   */
  async admit(reply: {
    organizationId: string;
    endUserId: string;
    promptTexts: readonly string[];
  }): Promise<SpendAdmission> {
    const { organizationId, endUserId } = reply;
    const limits = await this.limits.forOrganization(organizationId);
    const admission: SpendAdmission = {
      organizationId,
      limits,
      reservation: null,
      released: false,
    };
    const monthly = limits.monthlyTokenBudget;
    const daily = limits.endUserDailyTokenBudget;
    if (monthly === null && daily === null) return admission;
    // The reservation belongs to the month (and day) it is made in.
    const at = this.clock.now();
    const monthStart = `${at.toISOString().slice(0, 7)}-01`;
    const day = utcDay(at);
    const month = { budget: `month:${monthStart}`, start: monthStart, limit: monthly };
    const today = { budget: `day:${day}:${endUserId}`, day, limit: daily };
    const reservationId = randomUUID();
    const tokens = this.estimate(reply.promptTexts);
    const refusal = await this.reservations.reserve({
      organizationId,
      endUserId,
      month,
      day: today,
      reservationId,
      tokens,
      now: at,
      expiresAt: new Date(at.getTime() + this.reservationTtlMs),
    });
    if (refusal) {
      throw budgetExceeded(
        refusal.scope === 'organization'
          ? { scope: 'organization', limit: monthly!, resetsAt: firstOfNextMonth(at) }
          : { scope: 'end_user', limit: daily!, resetsAt: nextUtcDay(at) },
        refusal.counted,
      );
    }
    if (tokens > 0) {
      admission.reservation = {
        organizationId,
        budgets: [month, today].filter((b) => b.limit !== null).map((b) => b.budget),
        reservationIds: [reservationId],
        estimatedTokens: tokens,
      };
    }
    return admission;
  }

  /**
   * Between the model calls of a turn with tools (contract §26), and before the next route after
   * a billed answer that was no reply (a refusal): 402 `budget_exceeded` once the
   * turn's tokens so far, with what is counted and reserved already (other replies' estimates
   * included, this reply's own not), reach a budget. Admitted, those tokens and the estimate
   * of the next call (the admitted one, plus `addedPromptTexts`: the tool calls and outputs its
   * prompt now carries; the admitted estimate alone let a turn whose tools answered 15 KB each
   * overshoot a budget by 160 %, found by review) are held until the reply's statement settles them or
   * release() gives them back, replacing the previous hold: concurrent replies count them, so a budget is overshot
   * by one call of a turn, not by all of them. Each hold lapses a whole ENGINE_TIMEOUT_MS + 60 s
   * after it is made, so a long turn's estimate is made again each round rather than lapsing
   * after the first (found by review: past it, nothing held room for the next call).
   */
  async assertRoomFor(
    admission: SpendAdmission,
    endUserId: string,
    tokens: number,
    addedPromptTexts: readonly string[] = [],
  ): Promise<void> {
    const { organizationId, limits } = admission;
    const monthly = limits.monthlyTokenBudget;
    const daily = limits.endUserDailyTokenBudget;
    if ((monthly === null && daily === null) || tokens <= 0) return;
    const at = this.clock.now();
    const monthStart = `${at.toISOString().slice(0, 7)}-01`;
    const day = utcDay(at);
    const month = { budget: `month:${monthStart}`, start: monthStart, limit: monthly };
    const today = { budget: `day:${day}:${endUserId}`, day, limit: daily };
    const reserve = (reservationId: string, count: number) =>
      this.reservations.reserve({
        organizationId,
        endUserId,
        month,
        day: today,
        reservationId,
        tokens: count,
        now: at,
        expiresAt: new Date(at.getTime() + this.reservationTtlMs),
      });
    const budgets = [month, today].filter((b) => b.limit !== null).map((b) => b.budget);
    const held = admission.released ? null : admission.reservation;
    // The previous hold (the estimate, or the last round's) is part of this one: it goes first.
    if (held) {
      await this.reservations.release(organizationId, held.budgets, held.reservationIds);
      held.reservationIds = [];
    }
    // A budget refuses once what it counts has reached its limit: the turn's tokens are
    // reserved, then a reservation of none asks whether that reached it. The estimate, which
    // stands for the next call, is held beside them without joining that test, as admit() does
    // not count a reply's own estimate: a token per byte is a bound, not a forecast, and counting
    // it refused turns that had room (found by review).
    const spentId = randomUUID();
    const estimateId = randomUUID();
    let refusal = (await reserve(spentId, tokens)) ?? (await reserve(randomUUID(), 0));
    if (!refusal && held && held.estimatedTokens > 0) {
      refusal = await reserve(estimateId, held.estimatedTokens + promptTokensOf(addedPromptTexts));
    }
    if (refusal || !held) {
      await this.reservations.release(organizationId, budgets, [spentId, estimateId]);
    } else {
      held.reservationIds.push(spentId, estimateId);
      held.budgets = [...new Set([...held.budgets, ...budgets])];
    }
    if (refusal) {
      throw budgetExceeded(
        refusal.scope === 'organization'
          ? { scope: 'organization', limit: monthly!, resetsAt: firstOfNextMonth(at) }
          : { scope: 'end_user', limit: daily!, resetsAt: nextUtcDay(at) },
        refusal.counted,
      );
    }
  }

  /**
   * Gives the reply's reservation back when it failed or was cancelled (it cost nothing); a
   * stored reply's statement has settled it already. Never throws; once only.
   */
  release(admission: SpendAdmission | undefined): void {
    const reservation = admission?.reservation;
    if (!reservation || admission.released) return;
    admission.released = true;
    const { organizationId, budgets, reservationIds } = reservation;
    this.reservations.release(organizationId, budgets, reservationIds).catch((error: unknown) =>
      // Not released: it lapses at its expiry, counting against the budget until then.
      this.logger.warn({ err: error }, 'spend reservation not released; it will lapse'),
    );
  }

  /** The reply's statement, which deleted its reservation with exchangeSteps(), committed. */
  settled(admission: SpendAdmission): void {
    admission.released = true;
  }

  /**
   * Deletes now the reservations that lapsed (they stopped counting at their expiry already);
   * answers how many. Runs every minute on every instance, in bounded batches.
   */
  purgeLapsed(): Promise<number> {
    return this.lapsed.runNow();
  }

  /**
   * The steps this module adds to the reply's statement: the reply's reservation deleted as its tokens are added
   * (settled() once it committed), the budget's thresholds reached (`usage.threshold_reached`),
   * the relationship's meter event, the hour's tokens for the token meter.
   */
  exchangeSteps(admission: SpendAdmission, exchange: Exchange): { steps: WithEntry[] } {
    const steps: WithEntry[] = [];
    if (admission.reservation && !admission.released) {
      steps.push(reservationReleaseStep(admission.reservation));
    }
    steps.push(...this.tokenSteps(admission, exchange));
    if (this.billing.meterEventName) {
      steps.push(
        relationshipMeterEventStep(exchange.relationship, {
          eventName: this.billing.meterEventName,
          at: exchange.at,
        }),
      );
    }
    return { steps };
  }

  /**
   * The steps that follow tokens added to the month (`tokenUsageStep`), with a reply or without
   * (the tokens of a turn that paused or failed): the budget's thresholds reached
   * (`usage.threshold_reached`) and the hour's tokens for the token meter.
   */
  tokenSteps(
    admission: SpendAdmission,
    exchange: Pick<Exchange, 'at' | 'tokens' | 'tokensUsed'>,
  ): WithEntry[] {
    const { organizationId } = admission;
    const steps: WithEntry[] = [];
    if (exchange.tokens && admission.limits.monthlyTokenBudget !== null) {
      // The budget as it is now, not as it was when the reply was admitted: one raised meanwhile
      // would record its old 100 % with the old limit, and the real crossing never (found by
      // review). One removed meanwhile records none.
      const reached = usageThresholdStep(exchange.tokens, {
        organizationId,
        limit: sql`(SELECT l.monthly_token_budget FROM organization_limits l
                     WHERE l.organization_id = ${organizationId}::uuid)`,
        at: exchange.at,
      });
      steps.push(
        reached,
        webhookEventStep(reached, {
          organizationId,
          type: 'usage.threshold_reached',
          at: exchange.at,
        }),
      );
    }
    if (this.billing.tokenMeterEventName && exchange.tokens) {
      steps.push(tokenHourStep({ organizationId, at: exchange.at, tokens: exchange.tokensUsed }));
    }
    return steps;
  }
}

function budgetExceeded(
  scope: { scope: 'organization' | 'end_user'; limit: number; resetsAt: Date },
  used: number,
): AppError {
  const what =
    scope.scope === 'organization'
      ? "The organization's monthly token budget is spent"
      : "This end user's daily token budget is spent";
  return new AppError('budget_exceeded', `${what}; it resets at ${scope.resetsAt.toISOString()}`, {
    detailsObject: {
      scope: scope.scope,
      limit: scope.limit,
      used,
      resets_at: scope.resetsAt.toISOString(),
    },
  });
}

/** A prompt's tokens by the estimate's bound (tokensAtMost). */
function promptTokensOf(promptTexts: readonly string[]): number {
  let bytes = 0;
  for (const text of promptTexts) bytes += Buffer.byteLength(text, 'utf8');
  return tokensAtMost(bytes);
}
