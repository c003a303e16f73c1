import { randomUUID } from 'node:crypto';
import type { Scope } from '../../src/common/auth/caller';
import type { TestApp } from './test-app';

export interface SignedUp {
  userId: string;
  email: string;
  password: string;
  organizationId: string;
  accessToken: string;
}

export function uniqueEmail(tag = 'user'): string {
  return `${tag}-${randomUUID()}@example.test`;
}

/** A new user with a first organization they own, through the public sign-up endpoint. */
export async function signUp(
  t: TestApp,
  fields: { email?: string; password?: string } = {},
): Promise<SignedUp> {
  const email = fields.email ?? uniqueEmail();
  const password = fields.password ?? `correct horse ${randomUUID()}`;
  const response = await t.http().post('/v1/auth/signup').send({ email, password });
  if (response.status !== 201)
    throw new Error(`sign-up failed: ${response.status} ${JSON.stringify(response.body)}`);
  return {
    userId: response.body.user.id,
    email,
    password,
    organizationId: response.body.organization.id,
    accessToken: response.body.access_token,
  };
}

/** An API key of the user's (first) organization with these scopes, through POST /v1/api-keys. */
export async function createApiKey(
  t: TestApp,
  accessToken: string,
  scopes: Scope[],
  name = 'test key',
): Promise<string> {
  const response = await t
    .http()
    .post('/v1/api-keys')
    .set('Authorization', `Bearer ${accessToken}`)
    .send({ name, scopes });
  if (response.status !== 201)
    throw new Error(`key creation failed: ${response.status} ${JSON.stringify(response.body)}`);
  return response.body.key as string;
}

/** A fresh organization with an API key holding `scopes`: the usual caller of the data plane. */
export async function tenantWithKey(t: TestApp, scopes: Scope[] = ['read_write']) {
  const owner = await signUp(t);
  const key = await createApiKey(t, owner.accessToken, scopes);
  return { ...owner, key, auth: `Bearer ${key}` };
}
