import { randomUUID } from 'node:crypto';
import type { Scope, UserCaller } from '../../src/common/auth/caller';
import type { Role } from '../../src/organizations/entities/membership.entity';
import { ROLE_SCOPES } from '../../src/organizations/organization-access';
import type { CapturedMail, TestSmtpServer } from './smtp-server';
import type { HttpTarget } from './test-app';

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
  t: HttpTarget,
  fields: { email?: string; password?: string; organizationName?: string } = {},
): Promise<SignedUp> {
  const email = fields.email ?? uniqueEmail();
  const password = fields.password ?? `correct horse ${randomUUID()}`;
  const response = await t
    .http()
    .post('/v1/auth/signup')
    .send({ email, password, organization_name: fields.organizationName });
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
  t: HttpTarget,
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
export async function tenantWithKey(t: HttpTarget, scopes: Scope[] = ['read_write']) {
  const owner = await signUp(t);
  const key = await createApiKey(t, owner.accessToken, scopes);
  return { ...owner, key, auth: `Bearer ${key}` };
}

/** The token of the invitation link in a captured mail. */
export function invitationTokenOf(mail: CapturedMail): string {
  const match = /accept-invitation\?token=([A-Za-z0-9_-]+)/.exec(mail.decoded);
  if (!match) throw new Error('no invitation link in the mail');
  return match[1];
}

export const isInvitationMail = (mail: CapturedMail) =>
  mail.decoded.includes('accept-invitation?token=');

/**
 * A new user who joins `owner`'s organization with `role` through the API: invited by the owner,
 * signed up, the invitation's link read from the spec's SMTP server, accepted.
 */
export async function joinOrganization(
  t: HttpTarget,
  smtp: TestSmtpServer,
  owner: SignedUp,
  role: 'owner' | 'admin' | 'member' = 'member',
): Promise<SignedUp> {
  const email = uniqueEmail('invitee');
  const invited = await t
    .http()
    .post(`/v1/organizations/${owner.organizationId}/invitations`)
    .set('Authorization', `Bearer ${owner.accessToken}`)
    .send({ email, role });
  if (invited.status !== 201)
    throw new Error(`invitation failed: ${invited.status} ${JSON.stringify(invited.body)}`);
  const token = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
  const user = await signUp(t, { email });
  const accepted = await t
    .http()
    .post('/v1/invitations/accept')
    .set('Authorization', `Bearer ${user.accessToken}`)
    .send({ token });
  if (accepted.status !== 200)
    throw new Error(`acceptance failed: ${accepted.status} ${JSON.stringify(accepted.body)}`);
  return { ...user, organizationId: owner.organizationId };
}

/** The token of the verification link in a captured mail. */
export function verificationTokenOf(mail: CapturedMail): string {
  const match = /\/verify-email\?token=([A-Za-z0-9_-]+)/.exec(mail.decoded);
  if (!match) throw new Error('no verification link in the mail');
  return match[1];
}

export const isVerificationMail = (mail: CapturedMail) =>
  mail.decoded.includes('/verify-email?token=');

/**
 * A new user whose address is verified through the API: signed up, the verification link read
 * from the spec's SMTP server, POST /v1/auth/verify-email. Inviting needs it (contract §25).
 */
export async function signUpVerified(
  t: HttpTarget,
  smtp: TestSmtpServer,
  fields: { email?: string; password?: string; organizationName?: string } = {},
): Promise<SignedUp> {
  const user = await signUp(t, fields);
  await verifyEmail(t, smtp, user.email);
  return user;
}

/** Verifies `email` with the latest verification link mailed to it. */
export async function verifyEmail(
  t: HttpTarget,
  smtp: TestSmtpServer,
  email: string,
): Promise<void> {
  await smtp.waitFor(email, 5_000, isVerificationMail);
  const token = verificationTokenOf(smtp.mailsTo(email, isVerificationMail).at(-1)!);
  const verified = await t.http().post('/v1/auth/verify-email').send({ token });
  if (verified.status !== 204)
    throw new Error(`verification failed: ${verified.status} ${JSON.stringify(verified.body)}`);
}

/** The user acting in the organization with the scopes their role gives an access token. */
export function userCaller(userId: string, organizationId: string, role: Role): UserCaller {
  return {
    kind: 'user',
    userId,
    organizationId,
    scopes: ROLE_SCOPES[role],
    requestId: randomUUID(),
    ip: '192.0.2.20',
  };
}
