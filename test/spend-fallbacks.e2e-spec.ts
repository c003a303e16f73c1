import { expectError } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI, fakeModelEnv } from './support/fake-openai';
import { createApiKey, tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

/** What the fake reports for a refusal: billed, though it is no reply. */
const REFUSAL_USAGE = { prompt_tokens: 1_000, completion_tokens: 50 };

/**
 * Token budgets (contract §23) when a reply goes through fallback routes (§21): a route whose
 * answer was billed and was no reply (a refusal) sends the reply to the next route only after the
 * budgets are asked again, or each route's refusal spent a reply's estimate more than the reply
 * reserved (three routes overshot a budget by 86 %, found by review).
 */
describe('Spend control across fallback routes', () => {
  let fake: FakeOpenAI;
  let t: TestApp;

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        ...fakeModelEnv(fake),
        OPENAI_FALLBACKS: JSON.stringify([{ model: 'model-b' }, { model: 'model-c' }]),
        ENGINE_TIMEOUT_MS: '5000',
        ENGINE_MAX_TOKENS: '64',
      },
    });
  });
  beforeEach(() => fake.reset());
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  async function tenant(monthlyTokenBudget: number | null) {
    const owner = await tenantWithKey(t, ['read_write']);
    const admin = `Bearer ${await createApiKey(t, owner.accessToken, ['admin'], 'admin key')}`;
    const limits = await t
      .http()
      .patch(`/v1/organizations/${owner.organizationId}/limits`)
      .set('Authorization', admin)
      .send({ monthly_token_budget: monthlyTokenBudget });
    expect(limits.status).toBe(200);
    return { ...owner, personalityId: await clonePersonality(t, owner.auth) };
  }

  const reply = (who: { auth: string; personalityId: string }) =>
    t
      .http()
      .post('/v1/respond')
      .set('Authorization', who.auth)
      .send({ personality_id: who.personalityId, user_id: uniqueUserId(), message: 'hi' });

  const promptTokens = async (who: { auth: string }) => {
    const month = new Date().toISOString().slice(0, 7);
    const usage = await t
      .http()
      .get(`/v1/usage/tokens?month=${month}`)
      .set('Authorization', who.auth);
    expect(usage.status).toBe(200);
    return usage.body.prompt_tokens as number;
  };

  it('without a budget, a refused route hands the reply to the next (the control case)', async () => {
    const a = await tenant(null);
    fake.respondWith(
      { refusal: 'I cannot help with that.', usage: REFUSAL_USAGE },
      { refusal: 'I cannot help with that.', usage: REFUSAL_USAGE },
      { usage: { prompt_tokens: 100, completion_tokens: 50 } },
    );
    expect((await reply(a)).status).toBe(200);
    expect(fake.requests.map((request) => request.body?.model)).toEqual([
      'model-a',
      'model-b',
      'model-c',
    ]);
  });

  it('asks the next route when the budget still has room after a billed refusal', async () => {
    const a = await tenant(100_000);
    fake.respondWith(
      { refusal: 'I cannot help with that.', usage: REFUSAL_USAGE },
      { usage: { prompt_tokens: 100, completion_tokens: 50 } },
    );
    expect((await reply(a)).status).toBe(200);
    expect(fake.requests.map((request) => request.body?.model)).toEqual(['model-a', 'model-b']);
    // Both calls are counted: the refusal's and the reply's.
    expect(await promptTokens(a)).toBe(REFUSAL_USAGE.prompt_tokens + 100);
  });

  it('refuses the next route (402) once a billed refusal spent the room, and counts the refusal', async () => {
    const a = await tenant(500);
    fake.respondWith(
      { refusal: 'I cannot help with that.', usage: REFUSAL_USAGE },
      { refusal: 'I cannot help with that.', usage: REFUSAL_USAGE },
      { usage: { prompt_tokens: 100, completion_tokens: 50 } },
    );
    const refused = await reply(a);
    expectError(refused, 402, 'budget_exceeded');
    expect(fake.requests.map((request) => request.body?.model)).toEqual(['model-a']);
    // The refusal was billed: counted, so the next reply is refused before any call.
    expect(await promptTokens(a)).toBe(REFUSAL_USAGE.prompt_tokens);
    expectError(await reply(a), 402, 'budget_exceeded');
    expect(fake.requests).toHaveLength(1);
  });
});
