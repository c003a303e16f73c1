import type Stripe from 'stripe';
import { providerTimeOf, snapshotOf } from './subscription-snapshots';

function subscription(fields: Partial<Stripe.Subscription>): Stripe.Subscription {
  return {
    id: 'sub_1',
    object: 'subscription',
    customer: 'cus_1',
    status: 'active',
    pause_collection: null,
    cancel_at_period_end: false,
    items: {
      object: 'list',
      data: [{ price: { id: 'price_1' }, current_period_end: 1_800_000_000 }],
    },
    ...fields,
  } as unknown as Stripe.Subscription;
}

describe('snapshotOf', () => {
  it("keeps Stripe's status while collection runs", () => {
    expect(snapshotOf(subscription({ status: 'past_due' }))).toEqual({
      stripeSubscriptionId: 'sub_1',
      stripeCustomerId: 'cus_1',
      priceId: 'price_1',
      status: 'past_due',
      stripeStatus: 'past_due',
      collectionPaused: false,
      cancelAtPeriodEnd: false,
      currentPeriodEnd: new Date(1_800_000_000_000),
    });
  });

  it('reports a paused collection as suspended, unless the subscription has ended', () => {
    const pause = { behavior: 'void', resumes_at: null } as Stripe.Subscription.PauseCollection;
    expect(snapshotOf(subscription({ pause_collection: pause })).status).toBe('suspended');
    expect(snapshotOf(subscription({ pause_collection: pause, status: 'canceled' })).status).toBe(
      'canceled',
    );
  });

  it('reads the period end where API versions before basil put it, when its items lack it', () => {
    const before = subscription({
      items: { object: 'list', data: [{ price: { id: 'price_1' } }] },
      current_period_end: 1_700_000_000,
    } as unknown as Partial<Stripe.Subscription>);
    expect(snapshotOf(before).currentPeriodEnd).toEqual(new Date(1_700_000_000_000));
  });

  it('reads an expanded customer by its id', () => {
    const customer = { id: 'cus_2', object: 'customer' } as Stripe.Customer;
    expect(snapshotOf(subscription({ customer })).stripeCustomerId).toBe('cus_2');
  });
});

describe('providerTimeOf', () => {
  it("takes Stripe's Date header as the snapshot's time", () => {
    const response = { lastResponse: { headers: { date: 'Sun, 22 Nov 2026 03:00:07 GMT' } } };
    const now = new Date('2026-11-22T03:00:09.250Z');
    expect(providerTimeOf(response, now).toISOString()).toBe('2026-11-22T03:00:07.000Z');
  });

  it("falls back to the Clock's current second without one", () => {
    const now = new Date('2026-11-22T03:00:09.250Z');
    const time = providerTimeOf({}, now).getTime();
    expect(time % 1000).toBe(0);
    expect(new Date(time).toISOString()).toBe('2026-11-22T03:00:09.000Z');
  });
});
