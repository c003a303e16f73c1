import type autocannon from 'autocannon';
import Stripe from 'stripe';
import { FakeStripe, stripeEvent } from '../../test/support/fake-stripe';
import { load } from '../lib/load';
import { startService } from '../lib/service';

const WEBHOOK_SECRET = 'whsec_bench';

function signedEvent(type: string, object: unknown, created: number) {
  const payload = JSON.stringify(stripeEvent(type, object, created));
  const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
  return { payload, signature };
}

/**
 * The billing paths that take traffic without a provider round trip, on the built service with
 * the fake Stripe on loopback:
 * - new webhook events (signature check, event id + conditional update in one transaction);
 * - redelivered events (signature check, then the processed-id lookup);
 * - GET /v1/billing/subscription (the local mirror).
 */
export async function run(): Promise<Record<string, unknown>> {
  const fake = await FakeStripe.start();
  const service = await startService({
    env: {
      STRIPE_SECRET_KEY: 'sk_test_bench',
      STRIPE_API_BASE: fake.baseUrl,
      STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
    },
  });
  try {
    const signUp = await fetch(`${service.baseUrl}/v1/auth/signup`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({
        email: `bench-${Date.now()}@example.test`,
        password: 'a long bench password',
      }),
    });
    const { access_token: token } = (await signUp.json()) as { access_token: string };
    const auth = { Authorization: `Bearer ${token}` };
    const started = await fetch(`${service.baseUrl}/v1/billing/subscription`, {
      method: 'POST',
      headers: { ...auth, 'Content-Type': 'application/json' },
      body: JSON.stringify({ price_id: 'price_bench' }),
    });
    const { id } = (await started.json()) as { id: string };
    const subscription = fake.subscriptions.get(id)!;

    const webhookUrl = `${service.baseUrl}/v1/billing/webhooks`;
    // Each new event is a second newer than the last, so none ties (no re-read from Stripe).
    let created = Math.floor(Date.now() / 1000) + 10;
    const freshEvents = {
      url: webhookUrl,
      method: 'POST' as const,
      requests: [
        {
          method: 'POST' as const,
          setupRequest: (request: autocannon.Request): autocannon.Request => {
            const { payload, signature } = signedEvent(
              'customer.subscription.updated',
              { ...subscription, cancel_at_period_end: created % 2 === 0 },
              created++,
            );
            return {
              ...request,
              body: payload,
              headers: { 'Content-Type': 'application/json', 'Stripe-Signature': signature },
            };
          },
        },
      ],
    };
    const duplicate = signedEvent('customer.subscription.updated', subscription, created - 1000);
    const redelivered = {
      url: webhookUrl,
      method: 'POST' as const,
      body: duplicate.payload,
      headers: { 'Content-Type': 'application/json', 'Stripe-Signature': duplicate.signature },
    };
    await fetch(webhookUrl, {
      method: 'POST',
      body: redelivered.body,
      headers: redelivered.headers,
    });
    const read = { url: `${service.baseUrl}/v1/billing/subscription`, headers: auth };

    await load({ ...freshEvents, durationSeconds: 3 });
    const newEvents = await load(freshEvents);
    const duplicates = await load(redelivered);
    const subscriptionReads = await load(read);
    return {
      connections: 32,
      duration_seconds: 10,
      webhook_new_events: newEvents,
      webhook_redelivered_event: duplicates,
      get_subscription: subscriptionReads,
      stripe_calls_during_load: fake.requests.length - 2,
      goal: 'zero errors and zero non-2xx; no Stripe call on these paths',
    };
  } finally {
    await service.stop();
    await fake.close();
  }
}
