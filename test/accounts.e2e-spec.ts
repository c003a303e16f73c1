import { randomUUID } from 'node:crypto';
import type { Response } from 'supertest';
import { MailService } from '../src/mail/mail.service';
import { expectError } from './support/assertions';
import {
  isVerificationMail,
  joinOrganization,
  signUp,
  type SignedUp,
  signUpVerified,
  uniqueEmail,
  verificationTokenOf,
  verifyEmail,
} from './support/identity';
import { type CapturedMail, resetTokenOf, TestSmtpServer } from './support/smtp-server';
import { createTestApp, type TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';

const PUBLIC_URL = 'https://app.accounts.example';

/**
 * Accounts as contract §25 has them: a verified e-mail address (sign-up sends the link), `GET
 * /v1/me`, a cap on the organizations one user creates, and a mail when password login locks.
 */
describe('Accounts: e-mail verification, /v1/me, organizations per user, the lockout notice (§25)', () => {
  let t: TestApp;
  let smtp: TestSmtpServer;

  beforeAll(async () => {
    smtp = await new TestSmtpServer().start();
    t = await createTestApp({
      env: {
        ...UNTHROTTLED,
        SMTP_URL: smtp.url,
        APP_PUBLIC_URL: PUBLIC_URL,
        ORGANIZATIONS_PER_USER: '3',
        INVITATIONS_PER_DAY: '3',
        API_KEYS_PER_DAY: '4',
      },
    });
  });
  afterAll(async () => {
    await t.close();
    await smtp.stop();
  });

  const expectRetryAfterMidnight = (refused: { headers: Record<string, string> }) => {
    const retryAfter = Number(refused.headers['retry-after']);
    const midnight = new Date();
    midnight.setUTCHours(24, 0, 0, 0);
    expect(Math.abs(retryAfter - (midnight.getTime() - Date.now()) / 1000)).toBeLessThan(5);
  };
  const me = (token: string) => t.http().get('/v1/me').set('Authorization', `Bearer ${token}`);
  const verify = (token: unknown) => t.http().post('/v1/auth/verify-email').send({ token });

  describe('e-mail verification', () => {
    it('sends a link at sign-up; the token verifies the address once (204), then is refused', async () => {
      const user = await signUp(t);
      const before = await me(user.accessToken);
      expect(before.status).toBe(200);
      expect(before.body).toEqual({
        id: user.userId,
        email: user.email,
        name: null,
        email_verified: false,
        created_at: expect.any(String),
      });
      const mail = await smtp.waitFor(user.email, 5_000, isVerificationMail);
      expect(mail.decoded).toContain(`${PUBLIC_URL}/console/verify-email?token=`);
      const token = verificationTokenOf(mail);
      expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);

      const verified = await verify(token);
      expect(verified.status).toBe(204);
      expect(verified.text).toBe('');
      expect((await me(user.accessToken)).body.email_verified).toBe(true);
      // Used once: refused like an unknown one.
      expectError(await verify(token), 400, 'validation_failed');
    });

    it('two links of one user used at once: one verifies, the other is refused, never a deadlock', async () => {
      for (let round = 0; round < 6; round++) {
        const user = await signUp(t);
        await smtp.waitFor(user.email, 5_000, isVerificationMail);
        await t
          .http()
          .post('/v1/auth/resend-verification')
          .set('Authorization', `Bearer ${user.accessToken}`)
          .expect(202);
        await t.app.get(MailService).idle();
        const links = smtp.mailsTo(user.email, isVerificationMail).map(verificationTokenOf);
        expect(links).toHaveLength(2);
        const answers = await Promise.all(links.map((token) => verify(token)));
        // Found by review: each spent its own link, then waited for the other's (a 500).
        expect(answers.map((answer) => answer.status).sort()).toEqual([204, 400]);
        expect((await me(user.accessToken)).body.email_verified).toBe(true);
      }
    });

    it('refuses unknown and malformed tokens with validation_failed', async () => {
      for (const token of ['x'.repeat(43), 'short', '', 42, null]) {
        expectError(await verify(token), 400, 'validation_failed');
      }
      expectError(
        await t
          .http()
          .post('/v1/auth/verify-email')
          .send({ token: 'x'.repeat(43), extra: 1 }),
        400,
        'validation_failed',
      );
    });

    it('resends a link (202) to a user token, not to an API key or no credential', async () => {
      const user = await signUp(t);
      await smtp.waitFor(user.email, 5_000, isVerificationMail);
      const resent = await t
        .http()
        .post('/v1/auth/resend-verification')
        .set('Authorization', `Bearer ${user.accessToken}`);
      expect(resent.status).toBe(202);
      await t.app.get(MailService).idle();
      const mails = smtp.mailsTo(user.email, isVerificationMail);
      expect(mails).toHaveLength(2);
      // Either link works (each once).
      expect((await verify(verificationTokenOf(mails[1]))).status).toBe(204);
      expectError(await t.http().post('/v1/auth/resend-verification'), 401, 'unauthenticated');
      const key = await t
        .http()
        .post('/v1/api-keys')
        .set('Authorization', `Bearer ${user.accessToken}`)
        .send({ name: 'k', scopes: ['admin'] });
      expectError(
        await t
          .http()
          .post('/v1/auth/resend-verification')
          .set('Authorization', `Bearer ${key.body.key as string}`),
        403,
        'user_token_required',
      );
      expectError(
        await t
          .http()
          .get('/v1/me')
          .set('Authorization', `Bearer ${key.body.key as string}`),
        403,
        'user_token_required',
      );
      expectError(await t.http().get('/v1/me'), 401, 'unauthenticated');
    });
  });

  describe('invitations per day: per organization and per inviting user', () => {
    const send = (
      inviter: { accessToken: string },
      organizationId: string,
      email = uniqueEmail(),
    ) =>
      t
        .http()
        .post(`/v1/organizations/${organizationId}/invitations`)
        .set('Authorization', `Bearer ${inviter.accessToken}`)
        .send({ email, role: 'member' });
    const newOrganization = async (owner: SignedUp): Promise<string> => {
      const created = await t
        .http()
        .post('/v1/organizations')
        .set('Authorization', `Bearer ${owner.accessToken}`)
        .send({ name: `org ${randomUUID()}` });
      expect(created.status).toBe(201);
      return created.body.id as string;
    };

    it('sends at most INVITATIONS_PER_DAY per organization and UTC day (429 rate_limited), inviting again included', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await joinOrganization(t, smtp, owner, 'admin');
      await verifyEmail(t, smtp, admin.email);
      const same = uniqueEmail('again');
      expect((await send(owner, owner.organizationId, same)).status).toBe(201);
      expect((await send(owner, owner.organizationId, same)).status).toBe(201);
      // The organization's third, by another of its admins (joining took the first).
      const refused = await send(admin, owner.organizationId);
      expectError(refused, 429, 'rate_limited');
      expect(refused.body.error.message).toMatch(/An organization sends at most 3/);
      expectRetryAfterMidnight(refused);
      // Another organization has its own count.
      const other = await signUpVerified(t, smtp);
      expect((await send(other, other.organizationId)).status).toBe(201);
    });

    it('sends at most INVITATIONS_PER_DAY per inviting user across all their organizations', async () => {
      const owner = await signUpVerified(t, smtp);
      const second = await newOrganization(owner);
      const third = await newOrganization(owner);
      // The owner's first: an admin joins the first organization.
      const admin = await joinOrganization(t, smtp, owner, 'admin');
      await verifyEmail(t, smtp, admin.email);
      expect((await send(owner, second)).status).toBe(201);
      expect((await send(owner, third)).status).toBe(201);
      // Each organization has sent one or none; the owner has sent three.
      for (const organizationId of [owner.organizationId, second, third]) {
        const refused = await send(owner, organizationId);
        expectError(refused, 429, 'rate_limited');
        expect(refused.body.error.message).toMatch(
          /You send, across all your organizations, at most 3/,
        );
        expectRetryAfterMidnight(refused);
      }
      // Nothing of the refusals was counted: the first organization still takes two from its admin.
      expect((await send(admin, owner.organizationId)).status).toBe(201);
      expect((await send(admin, owner.organizationId)).status).toBe(201);
      expectError(await send(admin, owner.organizationId), 429, 'rate_limited');
    });

    it('holds under concurrent invitations from one user to several organizations', async () => {
      const owner = await signUpVerified(t, smtp);
      const organizations = [
        owner.organizationId,
        await newOrganization(owner),
        await newOrganization(owner),
      ];
      const answers = await Promise.all(
        organizations.flatMap((organizationId) =>
          Array.from({ length: 4 }, () => send(owner, organizationId)),
        ),
      );
      expect(answers.map((answer) => answer.status).sort()).toEqual([
        ...Array<number>(3).fill(201),
        ...Array<number>(9).fill(429),
      ]);
      for (const refused of answers.filter((answer) => answer.status === 429)) {
        expectError(refused, 429, 'rate_limited');
      }
      let open = 0;
      for (const organizationId of organizations) {
        const listed = await t
          .http()
          .get(`/v1/organizations/${organizationId}/invitations`)
          .set('Authorization', `Bearer ${owner.accessToken}`);
        open += (listed.body.data as unknown[]).length;
      }
      expect(open).toBe(3);
    });
  });

  describe('API keys per day (review: one admin made 250,000, and could be removed no more)', () => {
    const create = (auth: string, organizationId?: string) => {
      const request = t.http().post('/v1/api-keys').set('Authorization', auth);
      if (organizationId) request.set('X-Organization-Id', organizationId);
      return request.send({ name: 'k', scopes: ['admin'] });
    };
    const roll = (auth: string, id: string) =>
      t.http().post(`/v1/api-keys/${id}/roll`).set('Authorization', auth).send({});
    const expectCapped = (refused: Response, by: RegExp) => {
      expectError(refused, 429, 'rate_limited');
      expect(refused.body.error.message).toMatch(by);
      expectRetryAfterMidnight(refused);
    };

    it('makes at most API_KEYS_PER_DAY keys a UTC day per member, created or rolled, and as many through the keys of their lines', async () => {
      const owner = await signUpVerified(t, smtp);
      const auth = `Bearer ${owner.accessToken}`;
      const first = await create(auth);
      expect(first.status).toBe(201);
      const rolled = await roll(auth, first.body.id as string);
      expect(rolled.status).toBe(201);
      expect((await create(auth)).status).toBe(201);
      expect((await create(auth)).status).toBe(201);
      const byUser = /a member makes at most 4 API keys per UTC day/;
      expectCapped(await create(auth), byUser);
      expectCapped(await roll(auth, first.body.id as string), byUser);
      // A key of the owner's lines makes its own four: a leaked key spending them leaves the
      // owner their own to roll it with, and the reverse.
      const byKey = `Bearer ${rolled.body.key as string}`;
      for (let made = 0; made < 4; made++) expect((await create(byKey)).status).toBe(201);
      expectCapped(await create(byKey), /a member's keys make at most 4 API keys per UTC day/);
      // Another member of the organization has their own.
      const admin = await joinOrganization(t, smtp, owner, 'admin');
      expect((await create(`Bearer ${admin.accessToken}`, owner.organizationId)).status).toBe(201);
      // Nothing refused was made: the owner's 4 (the rolled key still works), its key's 4, the
      // admin's 1.
      const listed = await t.http().get('/v1/api-keys').set('Authorization', auth).expect(200);
      expect(listed.body.data).toHaveLength(9);
    });

    it('of concurrent creations, makes exactly as many as the day has room for', async () => {
      const auth = `Bearer ${(await signUp(t)).accessToken}`;
      const answers = await Promise.all(Array.from({ length: 9 }, () => create(auth)));
      const statuses = answers.map((answer) => answer.status).sort();
      expect(statuses).toEqual([201, 201, 201, 201, 429, 429, 429, 429, 429]);
    });
  });

  describe('organizations per user', () => {
    const create = (token: string, name = `org ${randomUUID()}`) =>
      t.http().post('/v1/organizations').set('Authorization', `Bearer ${token}`).send({ name });

    it('lets a user create ORGANIZATIONS_PER_USER, the sign-up one included (409 organization_limit)', async () => {
      const user = await signUp(t);
      expect((await create(user.accessToken)).status).toBe(201);
      expect((await create(user.accessToken)).status).toBe(201);
      expectError(await create(user.accessToken), 409, 'organization_limit');
    });

    it('holds under concurrent creates', async () => {
      const user = await signUp(t);
      const answers = await Promise.all(Array.from({ length: 10 }, () => create(user.accessToken)));
      expect(answers.filter((answer) => answer.status === 201)).toHaveLength(2);
      expect(answers.filter((answer) => answer.status === 409)).toHaveLength(8);
      const listed = await t
        .http()
        .get('/v1/organizations')
        .set('Authorization', `Bearer ${user.accessToken}`);
      expect(listed.body.data).toHaveLength(3);
    });
  });

  describe('names others read', () => {
    it('refuses (400) organization, key and document names of spaces or invisible characters', async () => {
      const user = await signUp(t);
      const asUser = (request: import('supertest').Test) =>
        request.set('Authorization', `Bearer ${user.accessToken}`);
      for (const blank of ['  ', '\u200b\u2800', '\u3164\u00a0']) {
        const answers = {
          organization: await asUser(t.http().post('/v1/organizations')).send({ name: blank }),
          signUp: await t
            .http()
            .post('/v1/auth/signup')
            .send({
              email: uniqueEmail('blank'),
              password: `a password ${randomUUID()}`,
              organization_name: blank,
            }),
          key: await asUser(t.http().post('/v1/api-keys')).send({ name: blank, scopes: ['read'] }),
          document: await asUser(t.http().post('/v1/knowledge')).send({
            title: blank,
            content: 'Opening hours: nine to five.',
          }),
        };
        for (const [route, answer] of Object.entries(answers)) {
          expect({ route, status: answer.status, code: answer.body.error?.code }).toEqual({
            route,
            status: 400,
            code: 'validation_failed',
          });
          expect(JSON.stringify(answer.body.error.details)).toContain(
            'must hold a visible character',
          );
        }
      }
      // Nothing was made; a name with spaces around a visible one is taken as sent.
      const listed = await asUser(t.http().get('/v1/organizations'));
      expect(listed.body.data).toHaveLength(1);
      const named = await asUser(t.http().post('/v1/organizations')).send({ name: ' \u200bAcme ' });
      expect(named.status).toBe(201);
      expect(named.body.name).toBe(' \u200bAcme ');
    });
  });

  describe('the lockout notice', () => {
    const login = (email: string, password: string) =>
      t.http().post('/v1/auth/login').send({ email, password });
    const isLockoutNotice = (mail: CapturedMail) => mail.subject.includes('locked');

    it('mails the account once when its address locks, with a reset link that lifts the lock', async () => {
      const user = await signUp(t);
      for (let attempt = 1; attempt <= 15; attempt++) {
        expect((await login(user.email, 'wrong password, surely')).status).toBe(401);
      }
      expectError(await login(user.email, user.password), 423, 'login_locked');
      const notice = await smtp.waitFor(user.email, 5_000, isLockoutNotice);
      expect(notice.decoded).toContain(`${PUBLIC_URL}/console/reset-password?token=`);
      // Later refusals send nothing more.
      expectError(await login(user.email, 'wrong again'), 423, 'login_locked');
      await t.app.get(MailService).idle();
      expect(smtp.mailsTo(user.email, isLockoutNotice)).toHaveLength(1);

      const newPassword = `a new password ${randomUUID()}`;
      const reset = await t
        .http()
        .post('/v1/auth/reset-password')
        .send({ token: resetTokenOf(notice), new_password: newPassword });
      expect(reset.status).toBe(200);
      expect((await login(user.email, newPassword)).status).toBe(200);
    });

    it('mails nobody when the locked address has no account', async () => {
      const email = uniqueEmail('nobody');
      for (let attempt = 1; attempt <= 16; attempt++) await login(email, 'guess');
      await t.app.get(MailService).idle();
      expect(smtp.mailsTo(email)).toEqual([]);
    });
  });
});
