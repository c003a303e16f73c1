import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { PersonalityApi, PersonalityApiError } from '@personality-api/client';
import { baseUrl, newTenant, uniqueUserId, type Tenant } from './support.js';

describe('typed calls (openapi-fetch)', () => {
  let tenant: Tenant;
  before(async () => {
    tenant = await newTenant();
  });

  it('POST creates (201), repeats answer 200, GET and PATCH read and change, DELETE answers 202', async () => {
    const { api } = tenant;
    const userId = uniqueUserId('typed');
    const created = await api.POST('/v1/end-users', {
      body: { user_id: userId, metadata: { plan: 'pro' } },
    });
    assert.equal(created.response.status, 201);
    assert.equal(created.data?.user_id, userId);
    assert.deepEqual(created.data?.metadata, { plan: 'pro' });
    assert.equal(created.data?.status, 'active');

    const again = await api.POST('/v1/end-users', { body: { user_id: userId } });
    assert.equal(again.response.status, 200);

    const read = await api.GET('/v1/end-users/{user_id}', {
      params: { path: { user_id: userId } },
    });
    assert.equal(read.error, undefined);
    assert.equal(read.data?.created_at, created.data?.created_at);

    const patched = await api.PATCH('/v1/end-users/{user_id}', {
      params: { path: { user_id: userId } },
      body: { metadata: { plan: 'team' } },
    });
    assert.deepEqual(patched.data?.metadata, { plan: 'team' });

    const deleted = await api.DELETE('/v1/end-users/{user_id}', {
      params: { path: { user_id: userId } },
    });
    assert.equal(deleted.response.status, 202);
    assert.equal(deleted.data?.status, 'deleting');
  });

  it('answers errors as {error, response}; PersonalityApiError.from reads the envelope', async () => {
    const missing = await tenant.api.GET('/v1/end-users/{user_id}', {
      params: { path: { user_id: uniqueUserId('missing') } },
    });
    assert.equal(missing.data, undefined);
    assert.equal(missing.response.status, 404);
    assert.equal(missing.error?.error.code, 'not_found');
    const error = PersonalityApiError.from(missing.error, missing.response);
    assert.ok(error instanceof PersonalityApiError);
    assert.equal(error.status, 404);
    assert.equal(error.code, 'not_found');
    assert.equal(error.requestId, missing.response.headers.get('x-request-id'));
    assert.match(error.message, /.+/);

    const invalid = await tenant.api.POST('/v1/end-users', {
      body: { user_id: '' },
    });
    const validation = PersonalityApiError.from(invalid.error, invalid.response);
    assert.equal(validation.status, 400);
    assert.equal(validation.code, 'validation_failed');
    // A 400's details list field problems (a 402's is one object: budget_exceeded).
    const problems = Array.isArray(validation.details) ? validation.details : [];
    assert.ok(problems.some((problem) => problem.field === 'user_id'));
  });

  it('authenticates with an access token, and X-Organization-Id through organizationId', async () => {
    const { accessToken, organizationId } = tenant;
    const mine = new PersonalityApi({ baseUrl, accessToken, organizationId });
    const organizations = await mine.GET('/v1/organizations');
    assert.deepEqual(
      organizations.data?.data.map((organization) => organization.id),
      [organizationId],
    );
    assert.equal((await mine.GET('/v1/end-users')).response.status, 200);

    const other = await newTenant();
    const foreign = new PersonalityApi({
      baseUrl,
      accessToken,
      organizationId: other.organizationId,
    });
    const refused = await foreign.GET('/v1/end-users');
    assert.equal(refused.response.status, 403);
    assert.equal(refused.error?.error.code, 'not_a_member');

    const withKey = await tenant.api.GET('/v1/organizations');
    assert.equal(withKey.error?.error.code, 'user_token_required');
  });

  it('public operations need no credential', async () => {
    const anonymous = new PersonalityApi({ baseUrl });
    const latest = await anonymous.GET('/v1/vocabularies/emotions');
    assert.ok(latest.data?.emotions.length);
    const refused = await anonymous.GET('/v1/end-users');
    assert.equal(refused.error?.error.code, 'unauthenticated');
  });
});
