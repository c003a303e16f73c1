import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { Counter } from 'prom-client';
import Stripe from 'stripe';
import { AppError } from '../common/errors/app-error';
import { billingConfig } from '../config/billing.config';
import { MetricsService } from '../metrics/metrics.service';
import { inClientSpan } from '../tracing/spans';

/** Raised when a provider call outlives the configured timeout, retries included. */
class ProviderDeadlineExceeded extends Error {
  constructor(readonly timeoutMs: number) {
    super(`No answer from Stripe within ${timeoutMs} ms`);
  }
}

export type StripeErrorMapper = (error: Stripe.errors.StripeError) => AppError | undefined;

export function notConfigured(): AppError {
  return new AppError(
    'billing_not_configured',
    'Billing is not configured on this service (no payment provider key)',
  );
}

/**
 * The one door to Stripe. Every call has a hard deadline of STRIPE_TIMEOUT_MS in total: the SDK's
 * own timeout applies per attempt and its network retries come on top, so without the deadline a
 * hanging provider would hold a request for (retries + 1) × timeout plus back-off. A call still in
 * flight when the deadline passes may finish at Stripe; every mutating call therefore carries an
 * idempotency key that a retry of our request derives again, so it replays instead of duplicating.
 */
@Injectable()
export class StripeGateway {
  private readonly stripe: Stripe | null;
  private readonly timeoutMs: number;
  private readonly requestsTotal: Counter<'operation' | 'outcome'>;

  constructor(
    @Inject(billingConfig.KEY) billing: ConfigType<typeof billingConfig>,
    private readonly logger: PinoLogger,
    metrics: MetricsService,
  ) {
    // `operation` is one of the fixed names this codebase passes to call(), so it stays bounded.
    this.requestsTotal = metrics.counter({
      name: 'payment_provider_requests_total',
      help: 'Calls to the payment provider by operation and outcome (ok, error, timeout)',
      labelNames: ['operation', 'outcome'],
    });
    this.timeoutMs = billing.timeoutMs;
    this.stripe = billing.stripeSecretKey
      ? new Stripe(billing.stripeSecretKey, {
          timeout: billing.timeoutMs,
          maxNetworkRetries: billing.maxNetworkRetries,
          telemetry: false,
          ...(billing.stripeApi ?? {}),
        })
      : null;
    this.logger.setContext(StripeGateway.name);
  }

  get configured(): boolean {
    return this.stripe !== null;
  }

  /** Throws 503 `billing_not_configured` when there is no key. */
  assertConfigured(): void {
    if (!this.stripe) throw notConfigured();
  }

  /**
   * Runs one SDK call under the deadline. Stripe errors and timeouts become 502
   * `payment_provider_error`, logged with our request id (bound by the request logger) and
   * Stripe's; `mapError` may turn a client-side Stripe error into a more precise answer.
   */
  async call<T>(
    operation: string,
    run: (stripe: Stripe) => Promise<T>,
    mapError?: StripeErrorMapper,
  ): Promise<T> {
    const stripe = this.stripe;
    if (!stripe) throw notConfigured();
    return inClientSpan(`stripe ${operation}`, { 'payment.operation': operation }, () =>
      this.callWithDeadline(stripe, operation, run, mapError),
    );
  }

  private async callWithDeadline<T>(
    stripe: Stripe,
    operation: string,
    run: (stripe: Stripe) => Promise<T>,
    mapError?: StripeErrorMapper,
  ): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_resolve, reject) => {
      timer = setTimeout(
        () => reject(new ProviderDeadlineExceeded(this.timeoutMs)),
        this.timeoutMs,
      );
    });
    try {
      const result = await Promise.race([run(stripe), deadline]);
      this.requestsTotal.inc({ operation, outcome: 'ok' });
      return result;
    } catch (error) {
      const timedOut = error instanceof ProviderDeadlineExceeded;
      this.requestsTotal.inc({ operation, outcome: timedOut ? 'timeout' : 'error' });
      if (error instanceof Stripe.errors.StripeError || timedOut) {
        throw this.toAppError(operation, error, mapError);
      }
      throw error;
    } finally {
      clearTimeout(timer);
    }
  }

  private toAppError(
    operation: string,
    error: Stripe.errors.StripeError | ProviderDeadlineExceeded,
    mapError?: StripeErrorMapper,
  ): AppError {
    if (error instanceof Stripe.errors.StripeError) {
      const mapped = mapError?.(error);
      if (mapped) return mapped;
      this.logger.error(
        {
          operation,
          stripeRequestId: error.requestId ?? null,
          stripeErrorType: error.type,
          stripeErrorCode: error.code ?? null,
          stripeStatusCode: error.statusCode ?? null,
          stripeMessage: error.message,
        },
        'payment provider call failed',
      );
    } else {
      this.logger.error(
        { operation, stripeRequestId: null, timeoutMs: error.timeoutMs },
        'payment provider call timed out',
      );
    }
    return new AppError(
      'payment_provider_error',
      'The payment provider failed or did not answer in time; retry the request',
    );
  }

  /** Verifies a webhook against each configured secret (rotation); null when none matches. */
  verifyWebhook(
    payload: Buffer,
    signature: string,
    secrets: string[],
    toleranceSeconds: number,
  ): Stripe.Event | null {
    for (const secret of secrets) {
      try {
        return Stripe.webhooks.constructEvent(payload, signature, secret, toleranceSeconds);
      } catch (error) {
        if (!(error instanceof Stripe.errors.StripeSignatureVerificationError)) throw error;
      }
    }
    return null;
  }
}
