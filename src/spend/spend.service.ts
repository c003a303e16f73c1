import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { randomUUID } from 'node:crypto';
import { relationshipMeterEventStep, tokenHourStep } from '../billing/meter-events.step';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { billingConfig } from '../config/billing.config';
import { engineConfig } from '../config/engine.config';
import type { Source, WithEntry } from '../database/sql';
import type { MonthTokensColumns, NewRelationshipColumns } from '../usage/usage.steps';
import { UsageService } from '../usage/usage.service';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import { type AppliedLimits, LimitsService } from './limits.service';
import { type ReservationScope, SpendReservations } from './spend-reservations';
import { usageThresholdStep } from './usage-threshold.step';

/**
 * Tokens a reply is taken to cost before it is made: its prompt's UTF-8 bytes / 3 (a byte-level
 * tokenizer never makes more tokens than bytes; English runs about 4 bytes a token), plus
 * PROMPT_OVERHEAD_TOKENS for the instructions and the emotion vocabulary, plus ENGINE_MAX_TOKENS
 * (the cap the provider is sent for the reply itself).
 */
export const PROMPT_BYTES_PER_TOKEN = 3;
export const PROMPT_OVERHEAD_TOKENS = 512;
/** A reservation outlives its reply's longest possible life by this much, then lapses. */
const RESERVATION_MARGIN_MS = 30_000;

/** What admit() decided for a reply: the limits it met and what it reserved. */
export interface SpendAdmission {
  organizationId: string;
  limits: AppliedLimits;
  reservation: {
    id: string;
    amount: number;
    store: 'redis' | 'memory';
    keys: string[];
  } | null;
  released: boolean;
}

/** What store() hands exchangeSteps(): the sources its statement lends and the reply's tokens. */
export interface Exchange {
  at: Date;
  relationship: Source<NewRelationshipColumns>;
  /** The month's token counts after this reply; null when the engine reported no usage. */
  tokens: Source<MonthTokensColumns> | null;
  /** The reply's prompt + completion tokens (0 without usage). */
  tokensUsed: number;
}

const firstOfNextMonth = (at: Date) =>
  new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth() + 1, 1));
const firstOfNextDay = (at: Date) =>
  new Date(Date.UTC(at.getUTCFullYear(), at.getUTCMonth(), at.getUTCDate() + 1));

/**
 * Spend control for /v1/respond (docs/spend-control.md): before the provider is asked, a reply
 * is admitted against the organization's monthly and the end user's daily token budget, with an
 * estimate of its cost reserved (in Redis, shared by every instance) until its tokens are in
 * the database; its statement then carries the thresholds reached and the meter events.
 */
@Injectable()
export class SpendService {
  private readonly reservationTtlMs: number;

  constructor(
    @Inject(engineConfig.KEY) private readonly engine: ConfigType<typeof engineConfig>,
    @Inject(billingConfig.KEY) private readonly billing: ConfigType<typeof billingConfig>,
    private readonly limits: LimitsService,
    private readonly usage: UsageService,
    private readonly reservations: SpendReservations,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(SpendService.name);
    this.reservationTtlMs = this.engine.timeoutMs + RESERVATION_MARGIN_MS;
  }

  /** The estimate of a reply whose prompt carries these texts (0 for the local engine). */
  estimate(promptTexts: readonly string[]): number {
    if (this.engine.engine === 'local') return 0;
    let bytes = 0;
    for (const text of promptTexts) bytes += Buffer.byteLength(text, 'utf8');
    return (
      Math.ceil(bytes / PROMPT_BYTES_PER_TOKEN) + PROMPT_OVERHEAD_TOKENS + this.engine.maxTokens
    );
  }

  /**
   * Admits a reply or refuses it with 402 `budget_exceeded` before anything is asked of the
   * provider. With a budget, the reply's estimate is reserved until release(): a budget is then
   * overshot by at most what the replies in flight spend beyond their reservations.
   */
  async admit(reply: {
    organizationId: string;
    endUserId: string;
    promptTexts: readonly string[];
  }): Promise<SpendAdmission> {
    const { organizationId } = reply;
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
    const iso = at.toISOString();
    const spent = await this.usage.spent(
      organizationId,
      daily === null ? null : reply.endUserId,
      at,
    );
    const scopes: Array<ReservationScope & { scope: 'organization' | 'end_user'; resetsAt: Date }> =
      [];
    if (monthly !== null) {
      scopes.push({
        scope: 'organization',
        key: `{${organizationId}}:month:${iso.slice(0, 7)}`,
        limit: monthly,
        used: spent.month,
        resetsAt: firstOfNextMonth(at),
      });
    }
    if (daily !== null) {
      scopes.push({
        scope: 'end_user',
        key: `{${organizationId}}:end-user:${reply.endUserId}:${iso.slice(0, 10)}`,
        limit: daily,
        used: spent.day,
        resetsAt: firstOfNextDay(at),
      });
    }
    // Already spent: refused without touching the reservations.
    const spentOut = scopes.find((scope) => scope.used >= scope.limit);
    if (spentOut) throw budgetExceeded(spentOut, spentOut.used);
    const id = randomUUID();
    const amount = this.estimate(reply.promptTexts);
    const outcome = await this.reservations.reserve(id, amount, this.reservationTtlMs, scopes);
    if (!outcome.admitted) throw budgetExceeded(scopes[outcome.scope], outcome.counted);
    admission.reservation = {
      id,
      amount,
      store: outcome.store,
      keys: scopes.map((scope) => scope.key),
    };
    return admission;
  }

  /**
   * Gives the reply's reservation back once its tokens are stored (they count from the database
   * from then on), or once it failed or was cancelled (it cost nothing). Never throws; once only.
   */
  release(admission: SpendAdmission | undefined): void {
    const reservation = admission?.reservation;
    if (!reservation || admission.released) return;
    admission.released = true;
    this.reservations
      .release(reservation.id, reservation.amount, reservation.store, reservation.keys)
      .catch((error: unknown) =>
        // Not released: it lapses at its expiry, counting against the budget until then.
        this.logger.warn({ err: error }, 'spend reservation not released; it will lapse'),
      );
  }

  /**
   * The steps this module adds to the reply's statement, and a name for their shape (a part of
   * the prepared statement's name): the budget's thresholds reached (`usage.threshold_reached`),
   * the relationship's meter event, the hour's tokens for the token meter.
   */
  exchangeSteps(
    admission: SpendAdmission,
    exchange: Exchange,
  ): { steps: WithEntry[]; shape: string } {
    const { organizationId } = admission;
    const steps: WithEntry[] = [];
    let shape = '';
    const budget = admission.limits.monthlyTokenBudget;
    if (exchange.tokens && budget !== null) {
      const reached = usageThresholdStep(exchange.tokens, {
        organizationId,
        limit: budget,
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
      shape += '_thresholds';
    }
    if (this.billing.meterEventName) {
      steps.push(
        relationshipMeterEventStep(exchange.relationship, {
          eventName: this.billing.meterEventName,
          at: exchange.at,
        }),
      );
      shape += '_metered';
    }
    if (this.billing.tokenMeterEventName && exchange.tokens) {
      steps.push(tokenHourStep({ organizationId, at: exchange.at, tokens: exchange.tokensUsed }));
      shape += '_token_metered';
    }
    return { steps, shape };
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
