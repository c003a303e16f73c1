import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import Stripe from 'stripe';
import { BillingWebhooksService } from '../src/billing/billing-webhooks.service';
import { BillingService } from '../src/billing/billing.service';
import type { ApiKeyCaller, UserCaller } from '../src/common/auth/caller';
import { EndUsersService } from '../src/end-users/end-users.service';
import { ExportsService } from '../src/exports/exports.service';
import { ImportService } from '../src/exports/import.service';
import { FactsService } from '../src/memory/facts.service';
import type { CatalogEntryFile } from '../src/personalities/entities/personality-definition';
import { PersonalitiesService } from '../src/personalities/personalities.service';
import type { EngineReply } from '../src/respond/engine/response-engine';
import { RespondService } from '../src/respond/respond.service';
import { freshToolState, ToolTurnsService } from '../src/tools/tool-turns.service';
import { BREAKDOWN_GROUPS } from '../src/usage/dto/usage.dto';
import { UsageService } from '../src/usage/usage.service';
import { uniqueUserId } from './support/data-plane';
import { FakeStripe, stripeEvent } from './support/fake-stripe';
import { describeRecordedStatements, type RecordedFiles } from './support/recorded-statements';
import type { TestApp } from './support/test-app';
import { lookupOrderTool } from './support/tools';
import { spoolBody } from './support/spool';

const WEBHOOK_SECRET = 'whsec_recorded_statements';

/** Billing against the fake Stripe; its address is known once it listens (set below). */
const ENV: Record<string, string | undefined> = {
  STRIPE_SECRET_KEY: 'sk_test_recorded_0123456789',
  STRIPE_API_BASE: undefined,
  STRIPE_WEBHOOK_SECRET: WEBHOOK_SECRET,
  STRIPE_TIMEOUT_MS: '5000',
  STRIPE_MAX_NETWORK_RETRIES: '0',
  // No meter events: a reply of the setup writes none, and the worker has nothing to send.
  STRIPE_METER_EVENT_NAME: undefined,
  STRIPE_TOKEN_METER_EVENT_NAME: undefined,
  STRIPE_METER_POLL_INTERVAL_MS: '600000',
};

let fake: FakeStripe;

// Before the harness's beforeAll (an outer hook runs first): the app is built with its address.
beforeAll(async () => {
  fake = await FakeStripe.start();
  ENV.STRIPE_API_BASE = fake.baseUrl;
});

// After the harness's afterAll has closed the app.
afterAll(async () => {
  await fake?.close();
});

/** The shipped catalog entry sage-mentor, as a PMF document's personality (without its id). */
const SAGE = (() => {
  const entries = JSON.parse(
    readFileSync(join(__dirname, '../src/personalities/data/catalog.json'), 'utf8'),
  ) as CatalogEntryFile[];
  const { slug, version, name, description, traits, voice, system_prompt } = entries.find(
    (entry) => entry.slug === 'sage-mentor',
  )!;
  return {
    source_slug: slug,
    source_version: version,
    name,
    description,
    traits,
    voice,
    system_prompt,
  };
})();

/** A completed reply (a relationship of the month, two memories). */
async function reply(
  t: TestApp,
  caller: ApiKeyCaller,
  body: { personality_id: string; user_id: string; message: string },
): Promise<void> {
  const replies = t.app.get(RespondService);
  const answer = await replies.reply(await replies.prepare(caller, body), {
    signal: new AbortController().signal,
  });
  expect(answer.status).toBe('completed');
}

/** An admin signed in to the organization (billing's routes are theirs). */
function admin(organizationId: string): UserCaller {
  return { kind: 'user', organizationId, userId: randomUUID(), scopes: ['admin'] };
}

/** Delivers an event as Stripe would: its raw bytes and their Stripe-Signature header. */
function deliver(t: TestApp, event: unknown): Promise<void> {
  const payload = JSON.stringify(event);
  const signature = Stripe.webhooks.generateTestHeaderString({ payload, secret: WEBHOOK_SECRET });
  return t.app.get(BillingWebhooksService).receive(Buffer.from(payload), signature);
}

/** A body as the import route receives it: spooled to a temporary file. */
const spool = (body: unknown) => spoolBody(body, 1_048_576);

/** A document's chunks read to its end. */
async function readAll(chunks: AsyncIterable<string>): Promise<string> {
  let text = '';
  for await (const chunk of chunks) text += chunk;
  return text;
}

const FILES: RecordedFiles = {
  'usage.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId, caller } = await tenant();
    const usage = t.app.get(UsageService);
    for (const user of [uniqueUserId(), uniqueUserId()]) {
      await reply(t, caller, { personality_id: personalityId, user_id: user, message: 'Hello' });
    }
    // The month of the replies: the statements' text does not depend on which month is read.
    const month = usage.currentMonth();
    const first = await usage.items(organizationId, { month, limit: 1 });
    expect(first.data).toHaveLength(1);
    const sections = [
      await operation("the month's tokens, in all and by model", () =>
        usage.tokens(organizationId, month),
      ),
      await operation("the month's active relationships", () =>
        usage.activeRelationships(organizationId, month),
      ),
      await operation("the month's relationships, the first page", () =>
        usage.items(organizationId, { month, limit: 1 }),
      ),
      await operation("the month's relationships, a page after a cursor", () =>
        usage.items(organizationId, { month, limit: 1, startingAfter: first.data[0].id }),
      ),
    ];
    for (const groupBy of BREAKDOWN_GROUPS) {
      sections.push(
        await operation(`the month's tokens by ${groupBy}, the first page`, () =>
          usage.breakdown(organizationId, { month, groupBy, limit: 10 }),
        ),
      );
    }
    return sections;
  },

  'personalities.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId, caller } = await tenant();
    const personalities = t.app.get(PersonalitiesService);
    const doomed = await personalities.cloneFromCatalog(organizationId, 'sage-mentor');
    return [
      await operation('the catalog, the first page', () => personalities.listCatalog(10)),
      await operation('clone a catalog entry', () =>
        personalities.cloneFromCatalog(organizationId, 'sage-mentor'),
      ),
      await operation('list, the first page', () => personalities.list(organizationId, 10)),
      await operation('list, a page after a cursor', () =>
        personalities.list(organizationId, 10, personalityId),
      ),
      await operation('get', () => personalities.get(organizationId, personalityId)),
      await operation('update: name and traits', () =>
        personalities.update(organizationId, personalityId, {
          name: 'Renamed mentor',
          traits: ['patient', 'curious'],
        }),
      ),
      await operation('delete', () => personalities.remove(caller, doomed.id)),
    ];
  },

  'billing.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId } = await tenant();
    const billing = t.app.get(BillingService);
    const caller = admin(organizationId);
    return [
      await operation('start a subscription (the Stripe customer created first)', () =>
        billing.createSubscription(caller, 'price_basic'),
      ),
      await operation('get the subscription', () => billing.getSubscription(organizationId)),
      await operation('suspend', () => billing.suspend(caller)),
      await operation('resume', () => billing.resume(caller)),
      await operation('list invoices', () => billing.listInvoices(organizationId, 10)),
      await operation("the month's usage", () => billing.usageOf(organizationId)),
    ];
  },

  'billing-webhooks.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId } = await tenant();
    const started = await t.app
      .get(BillingService)
      .createSubscription(admin(organizationId), 'price_basic');
    const subscription = structuredClone(fake.subscriptions.get(started.id)!);
    // Later than the start's snapshot (Stripe's second of its answer): applied, never a tie.
    const later = Math.floor(Date.now() / 1000) + 60;
    const updated = stripeEvent(
      'customer.subscription.updated',
      { ...subscription, cancel_at_period_end: true },
      later,
    );
    const invoice = {
      id: `in_${randomUUID().replaceAll('-', '')}`,
      object: 'invoice',
      customer: subscription.customer,
      status: 'paid',
      parent: { subscription_details: { subscription: subscription.id } },
    };
    return [
      await operation('customer.subscription.updated, newer than the state held', () =>
        deliver(t, updated),
      ),
      await operation('invoice.paid', () =>
        deliver(t, stripeEvent('invoice.paid', invoice, later + 1)),
      ),
      await operation('an event delivered again', () => deliver(t, updated)),
      await operation('setup_intent.succeeded: the payment method new subscriptions charge', () =>
        deliver(
          t,
          stripeEvent(
            'setup_intent.succeeded',
            {
              id: `seti_${randomUUID().replaceAll('-', '')}`,
              object: 'setup_intent',
              customer: subscription.customer,
              payment_method: `pm_${randomUUID().replaceAll('-', '')}`,
              status: 'succeeded',
            },
            later + 2,
          ),
        ),
      ),
    ];
  },

  'exports.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId, caller } = await tenant();
    const userId = uniqueUserId();
    const conversation = { personality_id: personalityId, user_id: userId };
    await reply(t, caller, { ...conversation, message: 'We spent two weeks in Crete' });
    await reply(t, caller, { ...conversation, message: 'My sister plays the cello' });
    await t.app.get(FactsService).create(organizationId, userId, 'Likes green tea');
    const exportsService = t.app.get(ExportsService);
    return [
      await operation("an end user's PMF v1 export, read to its end", async () =>
        JSON.parse(await readAll(await exportsService.exportDocument(organizationId, userId))),
      ),
      await operation("an end user's subject access document, read to its end", async () =>
        JSON.parse(await readAll(await exportsService.modelDocument(organizationId, userId))),
      ),
    ];
  },

  'import.service.sql': async ({ t, tenant, operation }) => {
    const { personalityId, caller } = await tenant();
    const newcomer = randomUUID();
    const at = '2025-05-01T10:00:00.000Z';
    // One personality the organization has, one new (its replies the catalog entry's), a message
    // to each, and a fact learned from the first.
    const document = {
      format: 'pmf',
      version: 1,
      exported_at: '2025-06-01T00:00:00.000Z',
      end_user: {
        user_id: uniqueUserId(),
        metadata: { plan: 'pro' },
        status: 'active',
        created_at: at,
        updated_at: at,
      },
      personalities: [
        { ...SAGE, id: personalityId },
        { ...SAGE, id: newcomer, name: 'Imported mentor' },
      ],
      relationships: [],
      memories: [
        {
          id: '1',
          personality_id: personalityId,
          role: 'user',
          content: 'I moved to Lyon last spring',
          emotion: { name: 'joy', intensity: 0.5 },
          vocabulary_version: '2.0.0',
          created_at: at,
          safety: { flagged: false, categories: [], action: 'none' },
        },
        {
          id: '2',
          personality_id: newcomer,
          role: 'personality',
          content: 'How do you like it there?',
          emotion: null,
          vocabulary_version: null,
          created_at: '2025-05-01T10:00:01.000Z',
          safety: { flagged: false, categories: [], action: 'none' },
        },
      ],
      facts: [
        {
          id: randomUUID(),
          content: 'Lives in Lyon',
          source: 'engine',
          memory_id: '1',
          created_at: '2025-05-01T10:00:02.000Z',
          updated_at: '2025-05-01T10:00:02.000Z',
        },
      ],
    };
    const spooled = await spool(document);
    try {
      return [
        await operation('a small PMF v1 document: two personalities, one new', async () => {
          const result = await t.app.get(ImportService).import(caller, spooled);
          expect(result).toMatchObject({ personalities_created: 1, memories_imported: 2 });
        }),
      ];
    } finally {
      await spooled.close();
    }
  },

  'tool-turns.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId } = await tenant();
    const userId = uniqueUserId();
    const { row: endUser } = await t.app.get(EndUsersService).ensure(organizationId, userId);
    const turns = t.app.get(ToolTurnsService);
    const { execution: _client, ...requestTool } = lookupOrderTool;
    const state = freshToolState(userId, 'Where is my order?', [requestTool]);
    // The engine's round, made here: it calls the client tool, so the turn pauses.
    const asked: EngineReply = {
      text: '',
      emotion: { name: 'neutral', intensity: 0 },
      detected: { name: 'neutral', intensity: 0 },
      usage: null,
      model: null,
      facts: [],
      toolCalls: [{ id: 'call_1', name: 'lookup_order', arguments: { order_id: 'A-1042' } }],
    };
    const context = {
      organizationId,
      endUserId: endUser.id,
      userId,
      personalityId,
      personalityTools: [],
      state,
      signal: new AbortController().signal,
      tokenSteps: () => [],
    };
    const outputs = [{ tool_call_id: 'call_1', output: { status: 'shipped' } }];
    return [
      await operation('pause a turn for a client tool (no tokens to count)', async () => {
        const outcome = await turns.run(context, async () => asked);
        expect(outcome.kind).toBe('paused');
      }),
      await operation("read a paused turn's end user (their rate bucket)", async () => {
        expect(await turns.userIdOfTurn(organizationId, state.turnId)).toBe(state.userId);
      }),
      await operation("check a paused turn's outputs", () =>
        turns.check(organizationId, state.turnId, outputs),
      ),
      await operation('claim a paused turn for its resumption', () =>
        turns.claim(organizationId, state.turnId, { pending: ['call_1'], rounds: 1 }),
      ),
      await operation('release a claimed turn whose resumption failed', () =>
        turns.release(organizationId, state.turnId),
      ),
    ];
  },
};

/** The account's operations: usage, billing, exports and import, personalities, tool turns. */
describeRecordedStatements(
  'the statements of the account operations (src/queries/*.service.sql)',
  FILES,
  ENV,
);
