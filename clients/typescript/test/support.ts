/**
 * What the client's tests share. They run against a real Personality API at PERSONALITY_API_URL
 * (test/typescript-client.e2e-spec.ts at the repository's root starts the built service for them,
 * installs the packed package and runs each file with `node --test`); each file makes a tenant of
 * its own, so files and runs never see each other's data.
 */
import { randomUUID } from 'node:crypto';
import { PersonalityApi, PersonalityApiError, type Fetch } from '@personality-api/client';

export const baseUrl = process.env.PERSONALITY_API_URL ?? 'http://127.0.0.1:3000';

export interface Tenant {
  /** An API key with every scope. */
  api: PersonalityApi;
  apiKey: string;
  /** The owner's access token. */
  accessToken: string;
  organizationId: string;
  /** A client with the tenant's key and another fetch (counting, failing…). */
  withFetch(fetch: Fetch, maxRetries?: number): PersonalityApi;
}

/** Signs a new user up (a new organization) and makes an API key of every scope. */
export async function newTenant(): Promise<Tenant> {
  const anonymous = new PersonalityApi({ baseUrl });
  const signup = await anonymous.POST('/v1/auth/signup', {
    body: { email: `client-${randomUUID()}@example.test`, password: `pw ${randomUUID()}` },
  });
  if (!signup.data) throw PersonalityApiError.from(signup.error, signup.response);
  const { access_token: accessToken, organization } = signup.data;
  const owner = new PersonalityApi({ baseUrl, accessToken });
  const key = await owner.POST('/v1/api-keys', {
    body: { name: 'client tests', scopes: ['read', 'read_write', 'admin'] },
  });
  if (!key.data?.key) throw PersonalityApiError.from(key.error, key.response);
  const apiKey = key.data.key;
  return {
    api: new PersonalityApi({ baseUrl, apiKey }),
    apiKey,
    accessToken,
    organizationId: organization.id,
    withFetch: (fetch, maxRetries) => new PersonalityApi({ baseUrl, apiKey, fetch, maxRetries }),
  };
}

/** A personality of the tenant, copied from the first catalog entry. */
export async function newPersonality(api: PersonalityApi): Promise<string> {
  const catalog = await api.GET('/v1/personalities/catalog', { params: { query: { limit: 1 } } });
  const slug = catalog.data?.data[0]?.slug;
  if (!slug) throw new Error('the catalog is empty');
  const created = await api.POST('/v1/personalities/from-catalog', { body: { slug } });
  if (!created.data) throw PersonalityApiError.from(created.error, created.response);
  return created.data.id;
}

/**
 * Streamed replies as the provider writes them: by default output moderation releases a reply a
 * checked sentence at a time (the service's docs/safety.md), which these tests do not look at.
 */
export async function withoutOutputModeration(tenant: Tenant): Promise<void> {
  const changed = await tenant.api.PATCH('/v1/organizations/{id}/safety', {
    params: { path: { id: tenant.organizationId } },
    body: { output_moderation: 'off' },
  });
  if (!changed.data) throw PersonalityApiError.from(changed.error, changed.response);
}

export const uniqueUserId = (label: string) => `${label}-${randomUUID()}`;

/** Resolves once `check` answers something, polling every 50 ms; fails after `timeoutMs`. */
export async function eventually<T>(check: () => T | undefined, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`nothing after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
