import { randomBytes } from 'node:crypto';
import { createServer, IncomingMessage, Server, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import Stripe from 'stripe';

/**
 * A small Stripe API on loopback for the e2e specs: the official SDK talks to it through
 * STRIPE_API_BASE. It implements the endpoints the service calls with Stripe-shaped JSON,
 * Stripe's idempotency (same key + same parameters → the stored answer replayed; other
 * parameters → 400 idempotency_error), records every request with its Idempotency-Key, and can be
 * told to fail (once or a few times) or to hang.
 */

export interface RecordedRequest {
  method: string;
  path: string;
  query: URLSearchParams;
  form: Record<string, unknown>;
  rawBody: string;
  idempotencyKey: string | undefined;
  authorization: string | undefined;
}

interface Fault {
  method: string;
  path: RegExp;
  kind: 'fail' | 'hang' | 'delay';
  status: number;
  remaining: number;
  delayMs?: number;
}

type Json = Record<string, unknown>;

export interface FakeSubscription extends Json {
  id: string;
  object: 'subscription';
  customer: string;
  status: string;
  pause_collection: { behavior: string; resumes_at: null } | null;
  cancel_at_period_end: boolean;
  created: number;
  metadata: Record<string, string>;
  default_payment_method: string | null;
  items: {
    object: 'list';
    data: Array<{ id: string; price: { id: string }; current_period_end: number }>;
  };
}

const now = () => Math.floor(Date.now() / 1000);
const newId = (prefix: string) => `${prefix}_${randomBytes(10).toString('hex')}`;

/** Stripe's form encoding (`items[0][price]=…`) back into nested objects (arrays stay keyed). */
/** A Stripe event as Stripe sends it to a webhook endpoint (the handler reads id, type, created, data). */
export function stripeEvent(type: string, object: unknown, created: number) {
  return {
    id: `evt_${randomBytes(10).toString('hex')}`,
    object: 'event',
    api_version: Stripe.API_VERSION,
    created,
    livemode: false,
    pending_webhooks: 1,
    request: { id: null, idempotency_key: null },
    type,
    data: { object },
  };
}

export function parseForm(raw: string): Json {
  const root: Json = {};
  for (const [key, value] of new URLSearchParams(raw)) {
    const parts = key.split(/\[|\]\[|\]/).filter((part) => part !== '');
    let node = root;
    parts.forEach((part, index) => {
      if (index === parts.length - 1) node[part] = value;
      else node = (node[part] ??= {}) as Json;
    });
  }
  return root;
}

export class FakeStripe {
  readonly requests: RecordedRequest[] = [];
  readonly customers = new Map<string, Json>();
  readonly setupIntents = new Map<string, Json>();
  readonly subscriptions = new Map<string, FakeSubscription>();
  readonly invoices: Json[] = [];
  /** Meter events taken, in order: one per identifier (Stripe keeps them unique). */
  readonly meterEvents: Array<{
    event_name: string;
    identifier: string;
    payload: Record<string, string>;
    timestamp: number;
  }> = [];
  /** Meter events refused because their identifier was taken already (a double send). */
  duplicateMeterEvents = 0;
  private readonly meterIdentifiers = new Set<string>();
  private readonly idempotent = new Map<string, { rawBody: string; status: number; body: Json }>();
  private faults: Fault[] = [];
  private readonly hanging = new Set<ServerResponse>();

  private constructor(private readonly server: Server) {}

  static async start(): Promise<FakeStripe> {
    const server = createServer();
    const fake = new FakeStripe(server);
    server.on('request', (request, response) => fake.onRequest(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return fake;
  }

  get baseUrl(): string {
    const { port } = this.server.address() as AddressInfo;
    return `http://127.0.0.1:${port}`;
  }

  /** The next `times` matching requests answer `status` with a Stripe error body. */
  fail(method: string, path: RegExp, status = 500, times = 1): void {
    this.faults.push({ method, path, kind: 'fail', status, remaining: times });
  }

  /** The next matching request is handled normally, but only after `delayMs`. */
  delay(method: string, path: RegExp, delayMs: number): void {
    this.faults.push({ method, path, kind: 'delay', status: 0, remaining: 1, delayMs });
  }

  /** Matching requests are never answered (until `clearFaults`). */
  hang(method: string, path: RegExp): void {
    this.faults.push({ method, path, kind: 'hang', status: 0, remaining: Infinity });
  }

  clearFaults(): void {
    this.faults = [];
    for (const response of this.hanging) response.destroy();
    this.hanging.clear();
  }

  requestsTo(method: string, path: RegExp): RecordedRequest[] {
    return this.requests.filter((r) => r.method === method && path.test(r.path));
  }

  customersOf(organizationId: string): Json[] {
    return [...this.customers.values()].filter(
      (c) => (c.metadata as Record<string, string>).organization_id === organizationId,
    );
  }

  subscriptionsOf(customerId: string): FakeSubscription[] {
    return [...this.subscriptions.values()].filter((s) => s.customer === customerId);
  }

  addInvoice(customer: string, fields: Json = {}): Json {
    const id = newId('in');
    const invoice: Json = {
      id,
      object: 'invoice',
      customer,
      number: `NUM-${this.invoices.length + 1}`,
      status: 'paid',
      currency: 'eur',
      amount_due: 4900,
      amount_paid: 4900,
      created: now() - 1000 + this.invoices.length,
      hosted_invoice_url: `https://invoice.stripe.test/${id}`,
      invoice_pdf: `https://invoice.stripe.test/${id}.pdf`,
      lines: { object: 'list', data: [] },
      ...fields,
    };
    this.invoices.push(invoice);
    return invoice;
  }

  async close(): Promise<void> {
    this.clearFaults();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private onRequest(request: IncomingMessage, response: ServerResponse): void {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const url = new URL(request.url ?? '/', 'http://fake');
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const recorded: RecordedRequest = {
        method: request.method ?? 'GET',
        path: url.pathname,
        query: url.searchParams,
        form: parseForm(rawBody),
        rawBody,
        idempotencyKey: request.headers['idempotency-key'] as string | undefined,
        authorization: request.headers.authorization,
      };
      this.requests.push(recorded);
      const fault = this.faults.find(
        (f) => f.remaining > 0 && f.method === recorded.method && f.path.test(recorded.path),
      );
      if (fault) {
        fault.remaining -= 1;
        if (fault.kind === 'hang') {
          this.hanging.add(response);
          return;
        }
        if (fault.kind === 'delay') {
          setTimeout(() => this.answer(recorded, response), fault.delayMs);
          return;
        }
        return this.send(response, fault.status, {
          error: { type: 'api_error', message: `Injected failure (${fault.status})` },
        });
      }
      this.answer(recorded, response);
    });
  }

  private answer(recorded: RecordedRequest, response: ServerResponse): void {
    const key = recorded.idempotencyKey;
    if (key && recorded.method === 'POST') {
      const stored = this.idempotent.get(key);
      if (stored) {
        if (stored.rawBody !== recorded.rawBody) {
          return this.send(response, 400, {
            error: {
              type: 'idempotency_error',
              message: 'Keys for idempotent requests can only be used with the same parameters',
            },
          });
        }
        response.setHeader('Idempotent-Replayed', 'true');
        return this.send(response, stored.status, stored.body);
      }
    }
    const [status, body] = this.route(recorded);
    if (key && recorded.method === 'POST' && status < 500) {
      this.idempotent.set(key, { rawBody: recorded.rawBody, status, body });
    }
    this.send(response, status, body);
  }

  private send(response: ServerResponse, status: number, body: Json): void {
    response.writeHead(status, {
      'Content-Type': 'application/json',
      'Request-Id': newId('req'),
    });
    response.end(JSON.stringify(body));
  }

  private route(r: RecordedRequest): [number, Json] {
    if (!r.authorization?.startsWith('Bearer sk_test_')) {
      return [401, { error: { type: 'invalid_request_error', message: 'Invalid API Key' } }];
    }
    const form = r.form;
    const subscriptionPath = /^\/v1\/subscriptions\/([^/]+)$/.exec(r.path);
    if (r.method === 'POST' && r.path === '/v1/customers') {
      const customer = {
        id: newId('cus'),
        object: 'customer',
        created: now(),
        metadata: form.metadata ?? {},
        invoice_settings: { default_payment_method: null },
      };
      this.customers.set(customer.id, customer);
      return [200, customer];
    }
    if (r.method === 'POST' && r.path === '/v1/setup_intents') {
      if (!this.customers.has(form.customer as string)) return missing('customer');
      const id = newId('seti');
      const intent = {
        id,
        object: 'setup_intent',
        client_secret: `${id}_secret_${randomBytes(12).toString('hex')}`,
        customer: form.customer,
        usage: form.usage ?? 'off_session',
        status: 'requires_payment_method',
        payment_method: null,
        metadata: form.metadata ?? {},
        created: now(),
      };
      this.setupIntents.set(id, intent);
      return [200, intent];
    }
    if (r.method === 'POST' && r.path === '/v1/billing/meter_events') {
      const identifier = (form.identifier as string | undefined) ?? newId('mev');
      if (this.meterIdentifiers.has(identifier)) {
        this.duplicateMeterEvents += 1;
        return [
          400,
          {
            error: {
              type: 'invalid_request_error',
              message: `An event already exists with identifier ${identifier}`,
            },
          },
        ];
      }
      this.meterIdentifiers.add(identifier);
      const event = {
        event_name: form.event_name as string,
        identifier,
        payload: (form.payload ?? {}) as Record<string, string>,
        timestamp: Number(form.timestamp ?? now()),
      };
      this.meterEvents.push(event);
      return [200, { object: 'billing.meter_event', created: now(), livemode: false, ...event }];
    }
    if (r.method === 'GET' && r.path === '/v1/invoices') {
      const customer = r.query.get('customer');
      const limit = Number(r.query.get('limit') ?? 10);
      let list = this.invoices
        .filter((invoice) => !customer || invoice.customer === customer)
        .sort((a, b) => (b.created as number) - (a.created as number));
      const after = r.query.get('starting_after');
      if (after) {
        const index = list.findIndex((invoice) => invoice.id === after);
        if (index === -1) return missing('starting_after');
        list = list.slice(index + 1);
      }
      return [
        200,
        {
          object: 'list',
          url: '/v1/invoices',
          data: list.slice(0, limit),
          has_more: list.length > limit,
        },
      ];
    }
    const price = /^\/v1\/prices\/([^/]+)$/.exec(r.path);
    if (r.method === 'GET' && price) {
      // Any price_… exists except price_missing…; price_archived… is not active.
      if (!price[1].startsWith('price_') || price[1].startsWith('price_missing')) {
        return missing('price');
      }
      return [
        200,
        { id: price[1], object: 'price', active: !price[1].startsWith('price_archived') },
      ];
    }
    if (r.method === 'POST' && r.path === '/v1/subscriptions') {
      if (!this.customers.has(form.customer as string)) return missing('customer');
      const price = ((form.items as Record<string, Json> | undefined)?.['0']?.price ??
        '') as string;
      if (!price.startsWith('price_') || price.startsWith('price_missing')) {
        return missing('items[0][price]');
      }
      const subscription: FakeSubscription = {
        id: newId('sub'),
        object: 'subscription',
        customer: form.customer as string,
        status: 'active',
        pause_collection: null,
        cancel_at_period_end: false,
        created: now(),
        metadata: (form.metadata ?? {}) as Record<string, string>,
        default_payment_method: (form.default_payment_method as string | undefined) ?? null,
        items: {
          object: 'list',
          data: [{ id: newId('si'), price: { id: price }, current_period_end: now() + 30 * 86400 }],
        },
      };
      this.subscriptions.set(subscription.id, subscription);
      return [200, subscription];
    }
    if (subscriptionPath) {
      const subscription = this.subscriptions.get(subscriptionPath[1]);
      if (!subscription) return missing('id');
      if (r.method === 'GET') return [200, subscription];
      if (r.method === 'DELETE') {
        subscription.status = 'canceled';
        return [200, subscription];
      }
      if (r.method === 'POST') {
        if (form.pause_collection === '') subscription.pause_collection = null;
        else if (form.pause_collection) {
          const pause = form.pause_collection as Record<string, string>;
          subscription.pause_collection = { behavior: pause.behavior, resumes_at: null };
        }
        return [200, subscription];
      }
    }
    return [
      404,
      {
        error: {
          type: 'invalid_request_error',
          message: `Unrecognized request URL (${r.method}: ${r.path})`,
        },
      },
    ];
  }
}

function missing(param: string): [number, Json] {
  return [
    400,
    {
      error: {
        type: 'invalid_request_error',
        code: 'resource_missing',
        param,
        message: `No such object: ${param}`,
      },
    },
  ];
}
