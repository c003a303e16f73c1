// The CommonJS build: in a .cts file these imports compile to require(); the other files load
// the ES module build.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import * as client from '@personality-api/client';

const baseUrl = process.env.PERSONALITY_API_URL ?? 'http://127.0.0.1:3000';

describe('the CommonJS build', () => {
  it('loads with require() and talks to the service', async () => {
    assert.match(require.resolve('@personality-api/client'), /index\.js$/);
    const api = new client.PersonalityApi({ baseUrl });
    const changelog = await api.GET('/v1/vocabularies/emotions/changelog');
    assert.ok(changelog.data?.data.length);

    const refused = new client.PersonalityApi({ baseUrl, apiKey: 'pk_not_a_key' });
    await assert.rejects(
      refused.respond({
        personality_id: '00000000-0000-4000-8000-000000000000',
        user_id: 'u',
        message: 'm',
      }),
      (error: unknown) =>
        error instanceof client.PersonalityApiError &&
        error.status === 401 &&
        error.code === 'unauthenticated',
    );
    assert.throws(
      () => client.verifyWebhook('{}', {}, 'whsec_c2VjcmV0'),
      client.WebhookVerificationError,
    );
  });
});
