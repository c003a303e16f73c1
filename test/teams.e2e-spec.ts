import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import type { Response } from 'supertest';
import type { DataSource } from 'typeorm';
import { AuditRetentionWorker } from '../src/audit/audit-retention.worker';
import { ErasureWorker } from '../src/end-users/erasure.worker';
import { expectError, expectRequestId } from './support/assertions';
import {
  createApiKey,
  invitationTokenOf,
  isInvitationMail,
  signUp,
  type SignedUp,
  signUpVerified,
  uniqueEmail,
  verifyEmail,
} from './support/identity';
import { TestSmtpServer } from './support/smtp-server';
import { createTestApp, TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';
import { eventually } from './support/wait';

const PUBLIC_URL = 'https://app.example.test';

describe('Teams: members, invitations, roles, key rolling, audit log (§18)', () => {
  let t: TestApp;
  let smtp: TestSmtpServer;
  let db: DataSource;

  beforeAll(async () => {
    smtp = await new TestSmtpServer().start();
    t = await createTestApp({
      env: { ...UNTHROTTLED, SMTP_URL: smtp.url, APP_PUBLIC_URL: PUBLIC_URL, REDIS_URL: undefined },
    });
    db = t.app.get<DataSource>(getDataSourceToken());
  });
  afterAll(async () => {
    await t.close();
    await smtp.stop();
  });

  const as = (token: string, organizationId?: string) => {
    const headers: Record<string, string> = { Authorization: `Bearer ${token}` };
    if (organizationId) headers['X-Organization-Id'] = organizationId;
    return headers;
  };

  async function invite(owner: SignedUp, email: string, role = 'member') {
    const response = await t
      .http()
      .post(`/v1/organizations/${owner.organizationId}/invitations`)
      .set(as(owner.accessToken))
      .send({ email, role });
    return response;
  }

  /**
   * Invites a fresh address, signs it up (verified through its link, unless told otherwise) and
   * accepts: a second member of owner's organization.
   */
  async function addMember(
    owner: SignedUp,
    role = 'member',
    options: { verified: boolean } = { verified: true },
  ): Promise<SignedUp> {
    const email = uniqueEmail('invitee');
    expect((await invite(owner, email, role)).status).toBe(201);
    const token = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
    const user = options.verified
      ? await signUpVerified(t, smtp, { email })
      : await signUp(t, { email });
    const accepted = await t
      .http()
      .post('/v1/invitations/accept')
      .set(as(user.accessToken))
      .send({ token });
    expect(accepted.status).toBe(200);
    return { ...user, organizationId: owner.organizationId };
  }

  async function auditOf(owner: SignedUp, action?: string) {
    const response = await t
      .http()
      .get(`/v1/audit-events${action ? `?action=${action}` : ''}`)
      .set(as(owner.accessToken));
    expect(response.status).toBe(200);
    return response.body.data as Array<{
      action: string;
      actor: { type: string; id: string };
      target: { type: string; id: string };
      details: Record<string, unknown>;
    }>;
  }

  it('answers 401 without a credential and 403 user_token_required to an API key on every member route', async () => {
    const owner = await signUpVerified(t, smtp);
    const key = await createApiKey(t, owner.accessToken, ['admin']);
    const org = owner.organizationId;
    const routes: Array<[string, string, object?]> = [
      ['get', `/v1/organizations/${org}/members`],
      ['patch', `/v1/organizations/${org}/members/${owner.userId}`, { role: 'owner' }],
      ['delete', `/v1/organizations/${org}/members/${owner.userId}`],
      ['post', `/v1/organizations/${org}/invitations`, { email: uniqueEmail(), role: 'member' }],
      ['get', `/v1/organizations/${org}/invitations`],
      ['delete', `/v1/organizations/${org}/invitations/${randomUUID()}`],
      ['post', '/v1/invitations/accept', { token: 'x' }],
    ];
    for (const [method, path, body] of routes) {
      const call = (headers: Record<string, string>) =>
        (t.http() as unknown as Record<string, (path: string) => import('supertest').Test>)
          [method](path)
          .set(headers)
          .send(body);
      expectError(await call({}), 401, 'unauthenticated');
      expectError(await call(as(key)), 403, 'user_token_required');
    }
  });

  describe('invitations', () => {
    it('invites by e-mail, the invitee signs up and accepts, and both appear as members', async () => {
      const owner = await signUpVerified(t, smtp);
      const email = uniqueEmail('grace');
      const created = await invite(owner, email, 'admin');
      expect(created.status).toBe(201);
      expect(created.body).toEqual({
        id: expect.any(String),
        email,
        role: 'admin',
        status: 'pending',
        expires_at: expect.any(String),
        created_at: expect.any(String),
      });
      const ttl = Date.parse(created.body.expires_at) - Date.parse(created.body.created_at);
      expect(Math.abs(ttl - 7 * 86_400_000)).toBeLessThan(5_000);

      const mail = await smtp.waitFor(email, 5_000, isInvitationMail);
      expect(mail.decoded).toContain(`${PUBLIC_URL}/console/accept-invitation?token=`);
      const token = invitationTokenOf(mail);
      expect(Buffer.from(token, 'base64url')).toHaveLength(32);
      // Hashed at rest: the token itself is nowhere in the table.
      const stored: Array<{ token_hash: Buffer }> = await db.query(
        'SELECT token_hash FROM invitations WHERE id = $1',
        [created.body.id],
      );
      expect(stored[0].token_hash.toString('hex')).not.toContain(
        Buffer.from(token, 'base64url').toString('hex'),
      );

      const invitee = await signUp(t, { email });
      const accepted = await t
        .http()
        .post('/v1/invitations/accept')
        .set(as(invitee.accessToken))
        .send({ token });
      expect(accepted.status).toBe(200);
      const orgs = await t.http().get('/v1/organizations').set(as(owner.accessToken));
      expect(accepted.body).toEqual({ ...orgs.body.data[0], role: 'admin' });

      const members = await t
        .http()
        .get(`/v1/organizations/${owner.organizationId}/members`)
        .set(as(invitee.accessToken));
      expect(members.status).toBe(200);
      expect(members.body.has_more).toBe(false);
      expect(
        members.body.data.map((m: Record<string, unknown>) => [m.user_id, m.email, m.role]),
      ).toEqual([
        [owner.userId, owner.email, 'owner'],
        [invitee.userId, email, 'admin'],
      ]);
      expect(members.body.data[1]).toEqual({
        user_id: invitee.userId,
        email,
        name: null,
        role: 'admin',
        joined_at: expect.any(String),
      });

      // The new admin acts in the organization at once.
      const keys = await t
        .http()
        .get('/v1/api-keys')
        .set(as(invitee.accessToken, owner.organizationId));
      expect(keys.status).toBe(200);

      const listed = await t
        .http()
        .get(`/v1/organizations/${owner.organizationId}/invitations`)
        .set(as(owner.accessToken));
      expect(listed.body.data[0]).toEqual({ ...created.body, status: 'accepted' });

      const [joined] = await auditOf(owner, 'member.joined');
      expect(joined).toEqual({
        id: expect.any(String),
        action: 'member.joined',
        actor: { type: 'user', id: invitee.userId },
        target: { type: 'user', id: invitee.userId },
        ip: expect.any(String),
        request_id: accepted.headers['x-request-id'],
        created_at: expect.any(String),
        details: { role: 'admin', invitation_id: created.body.id },
      });
      const [invited] = await auditOf(owner, 'member.invited');
      expect(invited).toEqual(
        expect.objectContaining({
          actor: { type: 'user', id: owner.userId },
          target: { type: 'invitation', id: created.body.id },
          request_id: created.headers['x-request-id'],
        }),
      );
      expect(JSON.stringify(await auditOf(owner))).not.toContain(token);
    });

    it('refuses a bad, used, revoked or expired token with 400 invalid_invitation', async () => {
      const owner = await signUpVerified(t, smtp);
      const user = await signUp(t);
      const accept = (token: string) =>
        t.http().post('/v1/invitations/accept').set(as(user.accessToken)).send({ token });
      expectError(await accept('not-a-token'), 400, 'invalid_invitation');
      expectError(await accept('A'.repeat(43)), 400, 'invalid_invitation');

      // Revoked.
      const revokedOne = await invite(owner, user.email);
      const revokedToken = invitationTokenOf(
        await smtp.waitFor(user.email, 5_000, isInvitationMail),
      );
      const revoke = await t
        .http()
        .delete(`/v1/organizations/${owner.organizationId}/invitations/${revokedOne.body.id}`)
        .set(as(owner.accessToken));
      expect(revoke.status).toBe(204);
      expectError(await accept(revokedToken), 400, 'invalid_invitation');
      const [revokedEvent] = await auditOf(owner, 'invitation.revoked');
      expect(revokedEvent.target).toEqual({ type: 'invitation', id: revokedOne.body.id });
      // Revoking it again: nothing open by that id.
      expectError(
        await t
          .http()
          .delete(`/v1/organizations/${owner.organizationId}/invitations/${revokedOne.body.id}`)
          .set(as(owner.accessToken)),
        404,
        'not_found',
      );

      // Expired.
      const before = smtp.mailsTo(user.email, isInvitationMail).length;
      const expiring = await invite(owner, user.email);
      const expiringToken = invitationTokenOf(
        await eventually(
          () => smtp.mailsTo(user.email, isInvitationMail)[before],
          `a new mail to ${user.email}`,
        ),
      );
      await db.query(
        `UPDATE invitations SET expires_at = now() - interval '1 second' WHERE id = $1`,
        [expiring.body.id],
      );
      expectError(await accept(expiringToken), 400, 'invalid_invitation');

      // Used.
      const member = await addMember(owner);
      const usedEvents = await auditOf(owner, 'member.joined');
      expect(usedEvents.some((event) => event.target.id === member.userId)).toBe(true);
    });

    it('refuses another address (403 invitation_email_mismatch) and API keys (403 user_token_required)', async () => {
      const owner = await signUpVerified(t, smtp);
      const email = uniqueEmail('intended');
      await invite(owner, email);
      const token = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
      const stranger = await signUp(t);
      expectError(
        await t.http().post('/v1/invitations/accept').set(as(stranger.accessToken)).send({ token }),
        403,
        'invitation_email_mismatch',
      );
      const key = await createApiKey(t, stranger.accessToken, ['admin']);
      expectError(
        await t.http().post('/v1/invitations/accept').set(as(key)).send({ token }),
        403,
        'user_token_required',
      );
      expectError(
        await t.http().post('/v1/invitations/accept').send({ token }),
        401,
        'unauthenticated',
      );
      // The intended address can still use it.
      const intended = await signUp(t, { email });
      expect(
        (
          await t
            .http()
            .post('/v1/invitations/accept')
            .set(as(intended.accessToken))
            .send({ token })
        ).status,
      ).toBe(200);
    });

    it('matches addresses as login does: case-insensitively, Unicode case included; other forms do not match', async () => {
      const owner = await signUpVerified(t, smtp);
      const local = `éva-${randomUUID()}`;
      const signedUpAs = `${local}@example.test`;
      const invitedAs = `${local.toUpperCase()}@EXAMPLE.TEST`;
      const created = await invite(owner, invitedAs);
      expect(created.status).toBe(201);
      expect(created.body.email).toBe(invitedAs);
      const token = invitationTokenOf(await smtp.waitFor(invitedAs, 5_000, isInvitationMail));
      // The decomposed form (e + U+0301) would be another account for the address as read: it
      // cannot sign up (nor be invited), so it never meets this invitation.
      expectError(
        await t
          .http()
          .post('/v1/auth/signup')
          .send({ email: signedUpAs.normalize('NFD'), password: 'a long enough password' }),
        400,
        'validation_failed',
      );
      expectError(await invite(owner, signedUpAs.normalize('NFD')), 400, 'validation_failed');
      // Nor the quoted spelling of the same mailbox.
      expectError(await invite(owner, `"${local}"@example.test`), 400, 'validation_failed');
      const user = await signUp(t, { email: signedUpAs });
      expect(
        (await t.http().post('/v1/invitations/accept').set(as(user.accessToken)).send({ token }))
          .status,
      ).toBe(200);
      // Now a member: inviting any case variant of the address is refused.
      expectError(await invite(owner, signedUpAs.toUpperCase()), 409, 'already_a_member');
      expectError(await invite(owner, owner.email.toUpperCase()), 409, 'already_a_member');
    });

    it('replaces an open invitation when the same address is invited again: one row, only the new link works', async () => {
      const owner = await signUpVerified(t, smtp);
      const email = uniqueEmail('twice');
      const first = await invite(owner, email, 'member');
      const firstToken = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
      const second = await invite(owner, email.toUpperCase(), 'admin');
      expect(second.status).toBe(201);
      expect(second.body.id).toBe(first.body.id);
      expect(second.body.role).toBe('admin');
      const secondToken = invitationTokenOf(
        await eventually(
          () => smtp.mailsTo(email, isInvitationMail)[1],
          `a second mail to ${email}`,
        ),
      );
      const user = await signUp(t, { email });
      const accept = (token: string) =>
        t.http().post('/v1/invitations/accept').set(as(user.accessToken)).send({ token });
      expectError(await accept(firstToken), 400, 'invalid_invitation');
      const accepted = await accept(secondToken);
      expect(accepted.body.role).toBe('admin');
      const listed = await t
        .http()
        .get(`/v1/organizations/${owner.organizationId}/invitations`)
        .set(as(owner.accessToken));
      expect(listed.body.data).toHaveLength(1);

      // Concurrent invitations of one address leave one open invitation.
      const raced = uniqueEmail('raced');
      const answers = await Promise.all([1, 2, 3, 4].map(() => invite(owner, raced)));
      expect(answers.map((answer) => answer.status)).toEqual([201, 201, 201, 201]);
      const open: unknown[] = await db.query(
        `SELECT 1 FROM invitations WHERE organization_id = $1 AND email_key = lower($2)
            AND accepted_at IS NULL AND revoked_at IS NULL`,
        [owner.organizationId, raced],
      );
      expect(open).toHaveLength(1);
    });

    it('lets exactly one of concurrent acceptances through, with one membership', async () => {
      const owner = await signUpVerified(t, smtp);
      const email = uniqueEmail('race');
      await invite(owner, email);
      const token = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
      const user = await signUp(t, { email });
      const answers = await Promise.all(
        Array.from({ length: 6 }, () =>
          t.http().post('/v1/invitations/accept').set(as(user.accessToken)).send({ token }),
        ),
      );
      expect(answers.map((answer) => answer.status).sort()).toEqual([200, 400, 400, 400, 400, 400]);
      for (const answer of answers.filter((a) => a.status === 400)) {
        expectError(answer, 400, 'invalid_invitation');
      }
      const rows: unknown[] = await db.query(
        'SELECT 1 FROM memberships WHERE organization_id = $1 AND user_id = $2',
        [owner.organizationId, user.userId],
      );
      expect(rows).toHaveLength(1);
      expect(await auditOf(owner, 'member.joined')).toHaveLength(1);
    });

    it('answers 404 for another organization (its invitations, members, or an id that names none)', async () => {
      const owner = await signUpVerified(t, smtp);
      const other = await signUpVerified(t, smtp);
      const email = uniqueEmail('other');
      const theirs = await invite(other, email);
      expectError(
        await t
          .http()
          .delete(`/v1/organizations/${owner.organizationId}/invitations/${theirs.body.id}`)
          .set(as(owner.accessToken)),
        404,
        'not_found',
      );
      expectError(
        await t
          .http()
          .delete(`/v1/organizations/${other.organizationId}/invitations/${theirs.body.id}`)
          .set(as(owner.accessToken)),
        404,
        'not_found',
      );
      for (const path of [
        `/v1/organizations/${other.organizationId}/members`,
        `/v1/organizations/${other.organizationId}/invitations`,
        `/v1/organizations/${randomUUID()}/members`,
        '/v1/organizations/not-a-uuid/members',
      ]) {
        expectError(await t.http().get(path).set(as(owner.accessToken)), 404, 'not_found');
      }
      expectError(
        await invite({ ...owner, organizationId: other.organizationId }, uniqueEmail()),
        404,
        'not_found',
      );
      // Still pending for its own organization.
      const listed = await t
        .http()
        .get(`/v1/organizations/${other.organizationId}/invitations`)
        .set(as(other.accessToken));
      expect(listed.body.data[0].status).toBe('pending');
    });

    it('validates the body and lets members only look', async () => {
      const owner = await signUpVerified(t, smtp);
      const member = await addMember(owner, 'member');
      for (const body of [
        { email: 'not-an-address', role: 'member' },
        { email: uniqueEmail(), role: 'superuser' },
        { email: uniqueEmail() },
        { email: uniqueEmail(), role: 'member', extra: true },
      ]) {
        expectError(
          await t
            .http()
            .post(`/v1/organizations/${owner.organizationId}/invitations`)
            .set(as(owner.accessToken))
            .send(body),
          400,
          'validation_failed',
        );
      }
      expectError(
        await t
          .http()
          .post(`/v1/organizations/${owner.organizationId}/invitations`)
          .set(as(member.accessToken))
          .send({ email: uniqueEmail(), role: 'member' }),
        403,
        'insufficient_role',
      );
      expectError(
        await t
          .http()
          .get(`/v1/organizations/${owner.organizationId}/invitations`)
          .set(as(member.accessToken)),
        403,
        'insufficient_role',
      );
      expect(
        (
          await t
            .http()
            .get(`/v1/organizations/${owner.organizationId}/members`)
            .set(as(member.accessToken))
        ).status,
      ).toBe(200);
    });
  });

  describe('invitations are no relay for phishing (§25)', () => {
    const phishy = 'PayPal Security Team: your account is locked, visit https://paypal.evil.test';

    it('names no organization-supplied text in the subject; the body quotes the name after a fixed sentence', async () => {
      const owner = await signUpVerified(t, smtp, { organizationName: phishy });
      const email = uniqueEmail('phished');
      expect((await invite(owner, email, 'member')).status).toBe(201);
      const mail = await smtp.waitFor(email, 5_000, isInvitationMail);
      expect(mail.subject).not.toMatch(/PayPal|https?:|evil/i);
      const sentence = `${owner.email} invited ${email} to join an organization on the Personality API as member.`;
      const text = mail.decoded.replace(/\r?\n/g, ' ').replace(/\s+/g, ' ');
      expect(text).toContain(sentence);
      expect(text.indexOf(sentence)).toBeLessThan(text.indexOf('PayPal'));
    });

    it('needs a verified address to invite (403 email_not_verified); a member gets the role refusal either way', async () => {
      const unverified = await signUp(t);
      expectError(await invite(unverified, uniqueEmail()), 403, 'email_not_verified');
      await verifyEmail(t, smtp, unverified.email);
      expect((await invite(unverified, uniqueEmail())).status).toBe(201);

      const owner = await signUpVerified(t, smtp);
      const member = await addMember(owner, 'member', { verified: false });
      const asMember = { ...member, organizationId: owner.organizationId };
      expectError(await invite(asMember, uniqueEmail()), 403, 'insufficient_role');
      await verifyEmail(t, smtp, member.email);
      expectError(await invite(asMember, uniqueEmail()), 403, 'insufficient_role');
      // An admin who could invite but is not verified yet.
      const admin = await addMember(owner, 'admin', { verified: false });
      expectError(
        await invite({ ...admin, organizationId: owner.organizationId }, uniqueEmail()),
        403,
        'email_not_verified',
      );
    });

    it('keeps an owner invitation from an admin: replacing or revoking it needs an owner', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const asAdmin = { ...admin, organizationId: owner.organizationId };
      const email = uniqueEmail('future-owner');
      const invited = await invite(owner, email, 'owner');
      expect(invited.status).toBe(201);
      expectError(await invite(asAdmin, email, 'member'), 403, 'insufficient_role');
      expectError(
        await t
          .http()
          .delete(`/v1/organizations/${owner.organizationId}/invitations/${invited.body.id}`)
          .set(as(admin.accessToken)),
        403,
        'insufficient_role',
      );
      const listed = await t
        .http()
        .get(`/v1/organizations/${owner.organizationId}/invitations`)
        .set(as(owner.accessToken));
      expect(
        (listed.body.data as Array<{ id: string; role: string; status: string }>).find(
          (row) => row.id === invited.body.id,
        ),
      ).toMatchObject({ role: 'owner', status: 'pending' });
      // The owner may replace it.
      expect((await invite(owner, email, 'admin')).body).toMatchObject({
        id: invited.body.id,
        role: 'admin',
      });
    });
  });

  describe('roles and removal', () => {
    const patch = (actor: SignedUp, organizationId: string, userId: string, role: string) =>
      t
        .http()
        .patch(`/v1/organizations/${organizationId}/members/${userId}`)
        .set(as(actor.accessToken))
        .send({ role });
    const remove = (actor: SignedUp, organizationId: string, userId: string) =>
      t
        .http()
        .delete(`/v1/organizations/${organizationId}/members/${userId}`)
        .set(as(actor.accessToken));

    it('changes a role (200 the member, audited) and keeps the last owner (409 last_owner)', async () => {
      const owner = await signUpVerified(t, smtp);
      const member = await addMember(owner);
      const promoted = await patch(owner, owner.organizationId, member.userId, 'admin');
      expect(promoted.status).toBe(200);
      expect(promoted.body).toEqual(
        expect.objectContaining({ user_id: member.userId, email: member.email, role: 'admin' }),
      );
      const [changed] = await auditOf(owner, 'member.role_changed');
      expect(changed).toEqual(
        expect.objectContaining({
          actor: { type: 'user', id: owner.userId },
          target: { type: 'user', id: member.userId },
          details: { from: 'member', to: 'admin' },
          request_id: promoted.headers['x-request-id'],
        }),
      );
      expectError(
        await patch(owner, owner.organizationId, owner.userId, 'admin'),
        409,
        'last_owner',
      );
      expectError(await remove(owner, owner.organizationId, owner.userId), 409, 'last_owner');
      expectError(
        await patch(owner, owner.organizationId, randomUUID(), 'admin'),
        404,
        'not_found',
      );
      expectError(
        await patch(owner, owner.organizationId, member.userId, 'root'),
        400,
        'validation_failed',
      );
      const owners: unknown[] = await db.query(
        `SELECT 1 FROM memberships WHERE organization_id = $1 AND role = 'owner'`,
        [owner.organizationId],
      );
      expect(owners).toHaveLength(1);
    });

    it('lets only an owner grant or remove owner; an admin manages members and admins', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const member = await addMember(owner, 'member');
      const org = owner.organizationId;
      expectError(await patch(admin, org, member.userId, 'owner'), 403, 'insufficient_role');
      expectError(await patch(admin, org, owner.userId, 'member'), 403, 'insufficient_role');
      expectError(await remove(admin, org, owner.userId), 403, 'insufficient_role');
      expectError(
        await invite({ ...admin, organizationId: org }, uniqueEmail(), 'owner'),
        403,
        'insufficient_role',
      );
      expectError(await patch(member, org, admin.userId, 'member'), 403, 'insufficient_role');
      expectError(await remove(member, org, admin.userId), 403, 'insufficient_role');
      expect((await patch(admin, org, member.userId, 'admin')).status).toBe(200);
      expect((await patch(admin, org, member.userId, 'member')).status).toBe(200);
      expect((await patch(owner, org, admin.userId, 'owner')).status).toBe(200);
      // Two owners now: one may step down.
      expect((await patch(admin, org, owner.userId, 'admin')).status).toBe(200);
    });

    it('never leaves zero owners when two owners demote each other, or leave, at once', async () => {
      for (let round = 0; round < 5; round++) {
        const first = await signUpVerified(t, smtp);
        const second = await addMember(first, 'owner');
        const org = first.organizationId;
        const answers = await Promise.all([
          patch(first, org, second.userId, 'admin'),
          patch(second, org, first.userId, 'admin'),
        ]);
        const statuses = answers.map((answer) => answer.status).sort();
        // The first to lock wins; the loser is no longer an owner (403) when its turn comes.
        expect(statuses).toEqual([200, 403]);
        const owners: unknown[] = await db.query(
          `SELECT 1 FROM memberships WHERE organization_id = $1 AND role = 'owner'`,
          [org],
        );
        expect(owners).toHaveLength(1);
        // Two owners leaving at once: one leaves, the other is the last owner.
        const winner = answers[0].status === 200 ? first : second;
        const loser = winner === first ? second : first;
        expect((await patch(winner, org, loser.userId, 'owner')).status).toBe(200);
        const leaving = await Promise.all([
          remove(first, org, first.userId),
          remove(second, org, second.userId),
        ]);
        expect(leaving.map((answer) => answer.status).sort()).toEqual([204, 409]);
        expectError(
          leaving.find((answer) => answer.status === 409)!,
          409,
          'last_owner',
        );
        const left: unknown[] = await db.query(
          `SELECT 1 FROM memberships WHERE organization_id = $1 AND role = 'owner'`,
          [org],
        );
        expect(left).toHaveLength(1);
      }
    });

    it('revokes the invitations a removed or demoted member may no longer send', async () => {
      const owner = await signUpVerified(t, smtp);
      const org = owner.organizationId;
      const ousted = await addMember(owner, 'owner');
      const demoted = await addMember(owner, 'owner');
      /** Sends an invitation as `sender`; answers its token, from the mail. */
      const sent = async (sender: SignedUp, role: string) => {
        const email = uniqueEmail('comeback');
        expect((await invite(sender, email, role)).status).toBe(201);
        return {
          email,
          token: invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail)),
        };
      };
      const accept = async ({ email, token }: { email: string; token: string }) => {
        const user = await signUpVerified(t, smtp, { email });
        return t.http().post('/v1/invitations/accept').set(as(user.accessToken)).send({ token });
      };
      const ownerComeback = await sent(ousted, 'owner');
      const adminComeback = await sent(ousted, 'admin');
      const demotedOwnerInvite = await sent(demoted, 'owner');
      const demotedAdminInvite = await sent(demoted, 'admin');

      expect((await remove(owner, org, ousted.userId)).status).toBe(204);
      // An owner demoted to admin may still invite admins, not owners.
      expect((await patch(owner, org, demoted.userId, 'admin')).status).toBe(200);

      for (const invitation of [ownerComeback, adminComeback, demotedOwnerInvite]) {
        expectError(await accept(invitation), 400, 'invalid_invitation');
      }
      expect((await accept(demotedAdminInvite)).status).toBe(200);
      const revoked = await auditOf(owner, 'invitation.revoked');
      expect(revoked.map((event) => [event.details.email, event.details.reason]).sort()).toEqual(
        [
          [ownerComeback.email, 'member_removed'],
          [adminComeback.email, 'member_removed'],
          [demotedOwnerInvite.email, 'member_demoted'],
        ].sort(),
      );
    });

    it('refuses an invitation whose sender no longer holds the role it grants, however it stayed pending', async () => {
      const owner = await signUpVerified(t, smtp);
      const org = owner.organizationId;
      const sender = await addMember(owner, 'owner');
      const email = uniqueEmail('stale');
      expect((await invite(sender, email, 'owner')).status).toBe(201);
      const token = invitationTokenOf(await smtp.waitFor(email, 5_000, isInvitationMail));
      // Demoted as before invitations went with it (sent before that existed): still pending.
      await db.query(
        `UPDATE memberships SET role = 'admin' WHERE organization_id = $1 AND user_id = $2`,
        [org, sender.userId],
      );
      const invitee = await signUpVerified(t, smtp, { email });
      expectError(
        await t.http().post('/v1/invitations/accept').set(as(invitee.accessToken)).send({ token }),
        400,
        'invalid_invitation',
      );
    });

    it('answers a stranger 404 without waiting on the organization’s membership locks', async () => {
      const owner = await signUpVerified(t, smtp);
      const member = await addMember(owner, 'member');
      const stranger = await signUp(t);
      const org = owner.organizationId;
      // Another change holds every membership row of the organization.
      const holder = db.createQueryRunner();
      await holder.connect();
      await holder.startTransaction();
      try {
        await holder.query('SELECT 1 FROM memberships WHERE organization_id = $1 FOR UPDATE', [
          org,
        ]);
        const stillWaiting = new Promise<'waiting'>((resolve) =>
          setTimeout(() => resolve('waiting'), 10_000).unref(),
        );
        const answers = await Promise.race([
          Promise.all([
            patch(stranger, org, member.userId, 'admin'),
            remove(stranger, org, member.userId),
          ]),
          stillWaiting,
        ]);
        expect(answers).not.toBe('waiting');
        for (const answer of answers as Awaited<ReturnType<typeof remove>>[]) {
          expectError(answer, 404, 'not_found');
        }
      } finally {
        await holder.rollbackTransaction();
        await holder.release();
      }
    });

    it('lets a member leave, and refuses the removed member from the very next request', async () => {
      const owner = await signUpVerified(t, smtp);
      const leaver = await addMember(owner, 'member');
      const removed = await addMember(owner, 'admin');
      const org = owner.organizationId;
      // Warm everything a cache could hold.
      expect((await t.http().get('/v1/api-keys').set(as(removed.accessToken, org))).status).toBe(
        200,
      );
      expect(
        (await t.http().get('/v1/personalities').set(as(leaver.accessToken, org))).status,
      ).toBe(200);

      expect((await remove(leaver, org, leaver.userId)).status).toBe(204);
      expectError(
        await t.http().get('/v1/personalities').set(as(leaver.accessToken, org)),
        403,
        'not_a_member',
      );

      expect((await patch(owner, org, removed.userId, 'member')).status).toBe(200);
      expectError(
        await t.http().get('/v1/api-keys').set(as(removed.accessToken, org)),
        403,
        'insufficient_scope',
      );
      expect((await remove(owner, org, removed.userId)).status).toBe(204);
      expectError(
        await t.http().get(`/v1/organizations/${org}/members`).set(as(removed.accessToken)),
        404,
        'not_found',
      );
      expectError(
        await t.http().get('/v1/personalities').set(as(removed.accessToken, org)),
        403,
        'not_a_member',
      );
      const events = await auditOf(owner, 'member.removed');
      expect(events.map((event) => [event.target.id, event.details.left])).toEqual([
        [removed.userId, false],
        [leaver.userId, true],
      ]);
    });
  });

  describe('a user who belongs to no organization', () => {
    /** A founder whose successor (an owner they invited) removed them from their only organization. */
    async function orphaned() {
      const founder = await signUpVerified(t, smtp);
      const successor = await addMember(founder, 'owner');
      const removal = await t
        .http()
        .delete(`/v1/organizations/${founder.organizationId}/members/${founder.userId}`)
        .set(as(successor.accessToken));
      expect(removal.status).toBe(204);
      return { founder, successor, org: founder.organizationId };
    }

    it('still sees themselves and accepts an invitation with their token; nothing else opens', async () => {
      const { founder, successor, org } = await orphaned();
      const token = founder.accessToken;

      const me = await t.http().get('/v1/me').set(as(token));
      expect(me.status).toBe(200);
      expect(me.body.id).toBe(founder.userId);
      const listed = await t.http().get('/v1/organizations').set(as(token));
      expect(listed.status).toBe(200);
      expect(listed.body).toEqual({ data: [], has_more: false });
      expectError(await t.http().get('/v1/personalities').set(as(token)), 403, 'not_a_member');
      expectError(await t.http().get('/v1/personalities').set(as(token, org)), 403, 'not_a_member');
      expectError(await t.http().get('/v1/me').set(as(token, org)), 403, 'not_a_member');

      expect((await invite(successor, founder.email, 'admin')).status).toBe(201);
      const invitation = invitationTokenOf(
        await smtp.waitFor(founder.email, 5_000, isInvitationMail),
      );
      const accepted = await t
        .http()
        .post('/v1/invitations/accept')
        .set(as(token))
        .send({ token: invitation });
      expect(accepted.status).toBe(200);
      expect(accepted.body.id).toBe(org);
      expect((await t.http().get('/v1/personalities').set(as(token))).status).toBe(200);
    });

    it('creates an organization, its Idempotency-Key kept for the user: a replay, not a second', async () => {
      const { founder } = await orphaned();
      const create = () =>
        t
          .http()
          .post('/v1/organizations')
          .set({ ...as(founder.accessToken), 'Idempotency-Key': 'new-home' })
          .send({ name: 'New home' });
      const created = await create();
      expect(created.status).toBe(201);
      const replayed = await create();
      expect(replayed.status).toBe(201);
      expect(replayed.body.id).toBe(created.body.id);
      const listed = await t.http().get('/v1/organizations').set(as(founder.accessToken));
      expect(listed.body.data.map((o: { id: string }) => o.id)).toEqual([created.body.id]);
      expect((await t.http().get('/v1/personalities').set(as(founder.accessToken))).status).toBe(
        200,
      );
    });
  });

  describe('the API keys a member made (§25)', () => {
    const remove = (actor: SignedUp, organizationId: string, userId: string, query = '') =>
      t
        .http()
        .delete(`/v1/organizations/${organizationId}/members/${userId}${query}`)
        .set(as(actor.accessToken));
    /** A key made with `credential`: an access token (acting for `organizationId`) or a key. */
    const keyAs = async (
      credential: string,
      scopes: string[],
      organizationId?: string,
      name = 'made by a member',
    ) => {
      const response = await t
        .http()
        .post('/v1/api-keys')
        .set(as(credential, organizationId))
        .send({ name, scopes });
      expect(response.status).toBe(201);
      return response.body as { id: string; key: string; created_by: unknown };
    };
    const works = async (key: string) =>
      (await t.http().get('/v1/audit-events?limit=1').set('Authorization', `Bearer ${key}`)).status;

    it('shows who made each key, and revokes what a removed member made (keys made by those keys too), at once', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const org = owner.organizationId;
      const adminKey = await keyAs(admin.accessToken, ['admin'], org);
      const madeByKey = await keyAs(adminKey.key, ['admin'], undefined, 'made by a key');
      const readKey = await keyAs(admin.accessToken, ['read'], org);
      const ownersKey = await keyAs(owner.accessToken, ['admin'], org, 'the owner’s');
      expect(adminKey.created_by).toEqual({ type: 'user', id: admin.userId });
      expect(madeByKey.created_by).toEqual({ type: 'api_key', id: adminKey.id });
      const listed = await t.http().get('/v1/api-keys').set(as(owner.accessToken));
      expect(
        Object.fromEntries(
          (listed.body.data as Array<{ id: string; created_by: unknown }>).map((k) => [
            k.id,
            k.created_by,
          ]),
        ),
      ).toEqual({
        [adminKey.id]: { type: 'user', id: admin.userId },
        [madeByKey.id]: { type: 'api_key', id: adminKey.id },
        [readKey.id]: { type: 'user', id: admin.userId },
        [ownersKey.id]: { type: 'user', id: owner.userId },
      });
      for (const key of [adminKey, madeByKey]) expect(await works(key.key)).toBe(200);

      expect((await remove(owner, org, admin.userId)).status).toBe(204);
      // Refused from the very next request: the removed admin keeps no admin power.
      for (const key of [adminKey, madeByKey]) expect(await works(key.key)).toBe(401);
      expect(
        (await t.http().get('/v1/personalities').set('Authorization', `Bearer ${readKey.key}`))
          .status,
      ).toBe(401);
      expect(await works(ownersKey.key)).toBe(200);
      const revoked = await auditOf(owner, 'api_key.revoked');
      expect(
        revoked
          .map((event) => ({
            key: event.target.id,
            actor: event.actor,
            reason: event.details.reason,
          }))
          .sort((a, b) => a.key.localeCompare(b.key)),
      ).toEqual(
        [adminKey.id, madeByKey.id, readKey.id].sort().map((key) => ({
          key,
          actor: { type: 'user', id: owner.userId },
          reason: 'member_removed',
        })),
      );
      const left = await t.http().get('/v1/api-keys').set(as(owner.accessToken));
      expect((left.body.data as Array<{ id: string }>).map((k) => k.id)).toEqual([ownersKey.id]);
    });

    it('ends a key made or rolled by a key no later than that key, so an expiry is a boundary', async () => {
      const owner = await signUpVerified(t, smtp);
      const inAnHour = new Date(Date.now() + 3_600_000).toISOString();
      const make = (credential: string, body: Record<string, unknown>) =>
        t
          .http()
          .post('/v1/api-keys')
          .set(as(credential))
          .send({ name: 'k', scopes: ['admin'], ...body });
      const expiring = await make(owner.accessToken, { expires_at: inAnHour });
      expect(expiring.status).toBe(201);
      const maker = expiring.body.key as string;
      const endOf = async (body: Record<string, unknown>) => {
        const made = await make(maker, body);
        expect(made.status).toBe(201);
        return made.body.expires_at as string | null;
      };
      expect(await endOf({})).toBe(inAnHour);
      // The audit log says the end that holds, not the one asked for.
      const [audited] = await auditOf(owner, 'api_key.created');
      expect(audited.details.expires_at).toBe(inAnHour);
      expect(await endOf({ expires_at: new Date(Date.now() + 7_200_000).toISOString() })).toBe(
        inAnHour,
      );
      const sooner = new Date(Date.now() + 1_800_000).toISOString();
      expect(await endOf({ expires_at: sooner })).toBe(sooner);

      // Rolling another key with the expiring one: the new key ends with its roller.
      const lasting = await make(owner.accessToken, {});
      const rolledByKey = await t
        .http()
        .post(`/v1/api-keys/${lasting.body.id}/roll`)
        .set(as(maker))
        .send({ expires_in_seconds: 60 });
      expect(rolledByKey.status).toBe(201);
      expect(rolledByKey.body.expires_at).toBe(inAnHour);
      // The cap is the stored one on this instance's cache too: the key works, as stored.
      expect((await t.http().get('/v1/api-keys').set(as(rolledByKey.body.key))).status).toBe(200);
      // A user's roll, and a key without an end rolling itself, make keys without one.
      const rolledByUser = await t
        .http()
        .post(`/v1/api-keys/${expiring.body.id}/roll`)
        .set(as(owner.accessToken))
        .send({ expires_in_seconds: 60 });
      expect(rolledByUser.body.expires_at).toBeNull();
      const self = await t
        .http()
        .post(`/v1/api-keys/${rolledByUser.body.id}/roll`)
        .set(as(rolledByUser.body.key))
        .send({ expires_in_seconds: 60 });
      expect(self.status).toBe(201);
      expect(self.body.expires_at).toBeNull();
    });

    it('revokes a key made by one of the member’s keys that was revoked before', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const org = owner.organizationId;
      const adminKey = await keyAs(admin.accessToken, ['admin'], org);
      const madeByKey = await keyAs(adminKey.key, ['admin'], undefined, 'made by a key');
      const revokedFirst = await t
        .http()
        .delete(`/v1/api-keys/${adminKey.id}`)
        .set(as(admin.accessToken, org));
      expect(revokedFirst.status).toBe(204);
      expect(await works(madeByKey.key)).toBe(200);
      const demoted = await t
        .http()
        .patch(`/v1/organizations/${org}/members/${admin.userId}`)
        .set(as(owner.accessToken))
        .send({ role: 'member' });
      expect(demoted.status).toBe(200);
      expect(await works(madeByKey.key)).toBe(401);
      const revoked = await auditOf(owner, 'api_key.revoked');
      expect(
        revoked
          .filter((event) => event.details.reason === 'member_demoted')
          .map((e) => e.target.id),
      ).toEqual([madeByKey.id]);
    });

    it('keeps them with ?keep_api_keys=true; a member who leaves cannot keep theirs', async () => {
      const owner = await signUpVerified(t, smtp);
      const kept = await addMember(owner, 'admin');
      const leaver = await addMember(owner, 'admin');
      const org = owner.organizationId;
      const keptKey = await keyAs(kept.accessToken, ['admin'], org);
      const leaverKey = await keyAs(leaver.accessToken, ['admin'], org);
      expect((await remove(owner, org, kept.userId, '?keep_api_keys=true')).status).toBe(204);
      expect(await works(keptKey.key)).toBe(200);
      expect((await remove(leaver, org, leaver.userId, '?keep_api_keys=true')).status).toBe(204);
      expect(await works(leaverKey.key)).toBe(401);
      expectError(
        await remove(owner, org, kept.userId, '?keep_api_keys=maybe'),
        400,
        'validation_failed',
      );
    });

    it('revokes the admin keys of an owner or admin demoted to member; their other keys stay', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const org = owner.organizationId;
      const adminKey = await keyAs(admin.accessToken, ['admin'], org);
      const writeKey = await keyAs(admin.accessToken, ['read_write'], org);
      const demoted = await t
        .http()
        .patch(`/v1/organizations/${org}/members/${admin.userId}`)
        .set(as(owner.accessToken))
        .send({ role: 'member' });
      expect(demoted.status).toBe(200);
      expect(await works(adminKey.key)).toBe(401);
      expect(
        (await t.http().get('/v1/personalities').set('Authorization', `Bearer ${writeKey.key}`))
          .status,
      ).toBe(200);
      const revoked = await auditOf(owner, 'api_key.revoked');
      expect(revoked.map((event) => [event.target.id, event.details.reason])).toEqual([
        [adminKey.id, 'member_demoted'],
      ]);
    });

    /**
     * Sessions waiting, directly or down a line of waiters, for the lock `holderPid` holds: how
     * the spec knows where the demotion and the creation have got to, whatever other sessions
     * of the database do meanwhile.
     */
    const waitingBehind = async (holderPid: number): Promise<number> => {
      const [row]: Array<{ waiting: number }> = await db.query(
        `WITH RECURSIVE blocked AS (
             SELECT pid FROM pg_stat_activity WHERE $1::int = ANY (pg_blocking_pids(pid))
             UNION
             SELECT a.pid FROM pg_stat_activity a JOIN blocked b ON b.pid = ANY (pg_blocking_pids(a.pid)))
         SELECT count(*)::int AS waiting FROM blocked`,
        [holderPid],
      );
      return row.waiting;
    };

    it.each([
      // The demotion waits for the hold on the member's own key, before it has locked anything
      // of the tree: the creation through that key goes first, and the demotion revokes its key.
      ['the member’s key', 'through the member’s key', false],
      // The demotion waits for the hold on a key made by the member's key, once it has locked
      // the member's own keys: the creation through that key waits for it, then is refused.
      ['a key made by the member’s key', 'through a key made by the member’s key', true],
    ])(
      'leaves no admin key behind when a key is made through the demoted admin’s keys at that moment (hold on %s; creation %s)',
      async (_held, _through, throughChild) => {
        const owner = await signUpVerified(t, smtp);
        const admin = await addMember(owner, 'admin');
        const org = owner.organizationId;
        const adminKey = await keyAs(admin.accessToken, ['admin'], org);
        const childKey = await keyAs(adminKey.key, ['admin'], undefined, 'made by a key');
        const creator = throughChild ? childKey : adminKey;
        // Each key used once (and its last_used_at written) before the hold, so the guard's
        // write of it is not one more session waiting.
        for (const key of [adminKey, childKey]) expect(await works(key.key)).toBe(200);
        await eventually(async () => {
          const rows: unknown[] = await db.query(
            `SELECT 1 FROM api_keys WHERE id = ANY ($1::uuid[]) AND last_used_at IS NOT NULL`,
            [[adminKey.id, childKey.id]],
          );
          return rows.length === 2 || undefined;
        }, 'last_used_at of both keys');

        const holder = new Client({ connectionString: process.env.DATABASE_URL });
        await holder.connect();
        let holding = true;
        const release = async () => {
          if (!holding) return;
          holding = false;
          await holder.query('ROLLBACK');
        };
        try {
          const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')).rows as Array<{
            pid: number;
          }>;
          await holder.query('BEGIN');
          // FOR SHARE: what a concurrent key creation through this key could hold; the demotion's
          // revocation waits for it, a creation or a foreign key check does not.
          await holder.query('SELECT 1 FROM api_keys WHERE id = $1 FOR SHARE', [creator.id]);
          const demoting = t
            .http()
            .patch(`/v1/organizations/${org}/members/${admin.userId}`)
            .set(as(owner.accessToken))
            .send({ role: 'member' })
            .then((response) => response);
          await eventually(
            async () => ((await waitingBehind(pid)) >= 1 ? true : undefined),
            'the demotion waiting for the held key',
          );
          let created: Response | undefined;
          const creating = t
            .http()
            .post('/v1/api-keys')
            .set('Authorization', `Bearer ${creator.key}`)
            .send({ name: 'made while the maker was demoted', scopes: ['admin'] })
            .then((response) => (created = response));
          // The creation either answers (it went first) or waits behind the demotion.
          await eventually(
            async () => (created || (await waitingBehind(pid)) >= 2 ? true : undefined),
            'the creation answering or waiting for the demotion',
          );
          await release();
          const [demoted] = await Promise.all([demoting, creating]);
          expect(demoted.status).toBe(200);
          const made = created!;
          if (throughChild) expectError(made, 401, 'unauthenticated');
          else expect(made.status).toBe(201);
          if (made.status === 201) {
            // Made through the member's key before the demotion locked it: revoked with the rest.
            expect(await works(made.body.key as string)).toBe(401);
          }
          // No admin key the member made, directly or down the line, still stands.
          const standing: unknown[] = await db.query(
            `WITH RECURSIVE made AS (
                 SELECT id FROM api_keys WHERE created_by_user_id = $1
                 UNION
                 SELECT k.id FROM api_keys k JOIN made m ON k.created_by_api_key_id = m.id)
             SELECT id FROM api_keys
              WHERE id IN (SELECT id FROM made) AND revoked_at IS NULL AND 'admin' = ANY (scopes)`,
            [admin.userId],
          );
          expect(standing).toEqual([]);
          const revoked = await auditOf(owner, 'api_key.revoked');
          expect(revoked.map((event) => [event.target.id, event.details.reason]).sort()).toEqual(
            [adminKey.id, childKey.id, ...(made.status === 201 ? [made.body.id as string] : [])]
              .sort()
              .map((id) => [id, 'member_demoted']),
          );
        } finally {
          await release().finally(() => holder.end());
        }
      },
    );

    it('makes no key with the access token of an admin demoted at that moment (403)', async () => {
      const owner = await signUpVerified(t, smtp);
      const admin = await addMember(owner, 'admin');
      const org = owner.organizationId;
      const holder = new Client({ connectionString: process.env.DATABASE_URL });
      await holder.connect();
      try {
        const [{ pid }] = (await holder.query('SELECT pg_backend_pid() AS pid')).rows as Array<{
          pid: number;
        }>;
        // A demotion under way: the membership is changed and locked, not yet committed, so the
        // request's guard still reads the admin role.
        await holder.query('BEGIN');
        await holder.query(
          `UPDATE memberships SET role = 'member' WHERE organization_id = $1 AND user_id = $2`,
          [org, admin.userId],
        );
        let created: Response | undefined;
        const creating = t
          .http()
          .post('/v1/api-keys')
          .set(as(admin.accessToken, org))
          .send({ name: 'made while demoted', scopes: ['admin'] })
          .then((response) => (created = response));
        await eventually(
          async () => (created || (await waitingBehind(pid)) >= 1 ? true : undefined),
          'the creation answering or waiting for the demotion',
        );
        await holder.query('COMMIT');
        expectError(await creating, 403, 'insufficient_scope');
        const made: unknown[] = await db.query(
          'SELECT id FROM api_keys WHERE organization_id = $1 AND created_by_user_id = $2',
          [org, admin.userId],
        );
        expect(made).toEqual([]);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
    });
  });

  describe('API key rolling', () => {
    it('tells webhook subscribers of the new key, and of the old one when the roll ends it at once', async () => {
      const owner = await signUpVerified(t, smtp);
      const org = owner.organizationId;
      await createApiKey(t, owner.accessToken, ['read_write'], 'backend');
      const [first] = (await t.http().get('/v1/api-keys').set(as(owner.accessToken))).body.data;
      // A subscriber (written here: the SSRF guard refuses a receiver on loopback), disabled
      // once read so that no delivery is tried.
      const [endpoint] = await db.query(
        `INSERT INTO webhook_endpoints (organization_id, url, events, secret)
         VALUES ($1, 'https://hooks.example.com/keys', ARRAY['api_key.created', 'api_key.revoked'],
                 'whsec_never-sent')
         RETURNING id`,
        [org],
      );
      const roll = (id: string, seconds: number) =>
        t
          .http()
          .post(`/v1/api-keys/${id}/roll`)
          .set(as(owner.accessToken))
          .send({ expires_in_seconds: seconds });
      const overlapping = await roll(first.id as string, 60);
      expect(overlapping.status).toBe(201);
      const atOnce = await roll(overlapping.body.id as string, 0);
      expect(atOnce.status).toBe(201);
      const events = await db.query(
        `SELECT type, data->>'id' AS id FROM webhook_events WHERE organization_id = $1
          ORDER BY type, data->>'id'`,
        [org],
      );
      await db.query(`UPDATE webhook_endpoints SET status = 'disabled' WHERE id = $1`, [
        endpoint.id,
      ]);
      const created = [overlapping.body.id as string, atOnce.body.id as string].sort();
      expect(events).toEqual([
        ...created.map((id) => ({ type: 'api_key.created', id })),
        { type: 'api_key.revoked', id: overlapping.body.id },
      ]);
    });

    it('issues a new key shown once (no-store); the old one works until its overlap ends', async () => {
      const owner = await signUpVerified(t, smtp);
      const oldKey = await createApiKey(t, owner.accessToken, ['read_write'], 'backend');
      const [listed] = (await t.http().get('/v1/api-keys').set(as(owner.accessToken))).body.data;
      const rolled = await t
        .http()
        .post(`/v1/api-keys/${listed.id}/roll`)
        .set(as(owner.accessToken))
        .send({});
      expect(rolled.status).toBe(201);
      expect(rolled.headers['cache-control']).toBe('no-store');
      expect(rolled.body).toEqual(
        expect.objectContaining({
          name: 'backend',
          scopes: ['read_write'],
          key: expect.stringMatching(/^pk_/),
        }),
      );
      expect(rolled.body.id).not.toBe(listed.id);
      for (const key of [oldKey, rolled.body.key as string]) {
        expect((await t.http().get('/v1/personalities').set(as(key))).status).toBe(200);
      }
      const keys = (await t.http().get('/v1/api-keys').set(as(owner.accessToken))).body.data;
      const old = keys.find((key: Record<string, unknown>) => key.id === listed.id);
      expect(Math.abs(Date.parse(old.expires_at) - Date.now() - 86_400_000)).toBeLessThan(10_000);
      expect(keys.every((key: Record<string, unknown>) => key.key === undefined)).toBe(true);

      const [event] = await auditOf(owner, 'api_key.rolled');
      expect(event).toEqual(
        expect.objectContaining({
          target: { type: 'api_key', id: listed.id },
          details: { new_key_id: rolled.body.id, old_key_expires_at: old.expires_at },
        }),
      );
      expect(JSON.stringify(await auditOf(owner))).not.toContain(rolled.body.key.slice(12));
    });

    it('ends the old key at once with 0, and after a short overlap', async () => {
      const owner = await signUpVerified(t, smtp);
      const oldKey = await createApiKey(t, owner.accessToken, ['admin']);
      const id = (await t.http().get('/v1/api-keys').set(as(oldKey))).body.data[0].id;
      const rolled = await t
        .http()
        .post(`/v1/api-keys/${id}/roll`)
        .set(as(oldKey))
        .send({ expires_in_seconds: 0 });
      expect(rolled.status).toBe(201);
      expectError(await t.http().get('/v1/api-keys').set(as(oldKey)), 401, 'unauthenticated');
      expectError(
        await t.http().post(`/v1/api-keys/${id}/roll`).set(as(owner.accessToken)).send({}),
        404,
        'not_found',
      );

      const shortId = rolled.body.id as string;
      const short = await t
        .http()
        .post(`/v1/api-keys/${shortId}/roll`)
        .set(as(owner.accessToken))
        .send({ expires_in_seconds: 1 });
      expect(short.status).toBe(201);
      const shortKey = rolled.body.key as string;
      expect((await t.http().get('/v1/api-keys').set(as(shortKey))).status).toBe(200);
      // Real time: the key's second runs out on the server's own clock.
      const status = await eventually(
        async () => {
          const answered = (await t.http().get('/v1/api-keys').set(as(shortKey))).status;
          return answered === 200 ? undefined : answered;
        },
        'the rolled key to expire',
        5_000,
      );
      expect(status).toBe(401);
      expect((await t.http().get('/v1/api-keys').set(as(short.body.key))).status).toBe(200);

      for (const body of [{ expires_in_seconds: -1 }, { expires_in_seconds: 'soon' }, { x: 1 }]) {
        expectError(
          await t
            .http()
            .post(`/v1/api-keys/${short.body.id}/roll`)
            .set(as(owner.accessToken))
            .send(body),
          400,
          'validation_failed',
        );
      }
      const reader = await createApiKey(t, owner.accessToken, ['read_write']);
      expectError(
        await t.http().post(`/v1/api-keys/${short.body.id}/roll`).set(as(reader)).send({}),
        403,
        'insufficient_scope',
      );
    });
  });

  describe('the audit log', () => {
    it('records key creation and revocation with actor, target, IP and request id; filters and pages', async () => {
      const owner = await signUpVerified(t, smtp);
      const key = await createApiKey(t, owner.accessToken, ['admin'], 'audited');
      const created = (await t.http().get('/v1/api-keys').set(as(owner.accessToken))).body.data[0];
      const revoked = await t
        .http()
        .delete(`/v1/api-keys/${created.id}`)
        .set(as(owner.accessToken));
      expect(revoked.status).toBe(204);
      const events = await auditOf(owner);
      // Sign-up's organization.created is the first.
      expect(events.map((event) => event.action)).toEqual([
        'api_key.revoked',
        'api_key.created',
        'organization.created',
      ]);
      // From the sign-up's own request.
      expect(events[2]).toMatchObject({
        actor: { type: 'user', id: owner.userId },
        target: { type: 'organization', id: owner.organizationId },
        ip: expect.stringMatching(/127\.0\.0\.1/),
        request_id: expect.stringMatching(/^\w{10,}$/),
      });
      expect(events[0]).toEqual({
        id: expect.any(String),
        action: 'api_key.revoked',
        actor: { type: 'user', id: owner.userId },
        target: { type: 'api_key', id: created.id },
        ip: expect.stringMatching(/127\.0\.0\.1|::1/),
        request_id: expectRequestId(revoked),
        created_at: expect.any(String),
        details: { name: 'audited' },
      });
      expect(events[1].details).toEqual({ name: 'audited', scopes: ['admin'], expires_at: null });
      expect(JSON.stringify(events)).not.toContain(key);

      // An API key acts as itself.
      const admin = await createApiKey(t, owner.accessToken, ['admin']);
      const adminId = (await t.http().get('/v1/api-keys?limit=1').set(as(admin))).body.data[0].id;
      const personality = await t
        .http()
        .post('/v1/personalities/from-catalog')
        .set(as(admin))
        .send({
          slug: (await t.http().get('/v1/personalities/catalog').set(as(admin))).body.data[0].slug,
        });
      expect(personality.status).toBe(201);
      expect(
        (await t.http().delete(`/v1/personalities/${personality.body.id}`).set(as(admin))).status,
      ).toBe(204);
      const [deleted] = await auditOf(owner, 'personality.deleted');
      expect(deleted).toEqual(
        expect.objectContaining({
          actor: { type: 'api_key', id: adminId },
          target: { type: 'personality', id: personality.body.id },
        }),
      );

      // end_user.deleted: the DELETE request, once however often it is repeated.
      const userId = `customer-${randomUUID()}`;
      expect(
        (await t.http().post('/v1/end-users').set(as(admin)).send({ user_id: userId })).status,
      ).toBe(201);
      for (let i = 0; i < 2; i++) {
        expect((await t.http().delete(`/v1/end-users/${userId}`).set(as(admin))).status).toBe(202);
      }
      const erased = await auditOf(owner, 'end_user.deleted');
      expect(erased.map((event) => event.target)).toEqual([{ type: 'end_user', id: userId }]);
      // Once the erasure completes, the log keeps the request but no longer names the person.
      // Ended a second ago: `now()` has microseconds, the worker's clock milliseconds, so a
      // grace period ending "now" can still lie ahead of it within the same millisecond.
      await db.query(
        `UPDATE end_users SET erase_after = now() - interval '1 second' WHERE user_id = $1`,
        [userId],
      );
      await t.app.get(ErasureWorker).eraseDue();
      expect((await auditOf(owner, 'end_user.deleted')).map((event) => event.target)).toEqual([
        { type: 'end_user', id: '[erased]' },
      ]);

      // Paging, newest first.
      const page1 = await t.http().get('/v1/audit-events?limit=2').set(as(owner.accessToken));
      expect(page1.body.has_more).toBe(true);
      const page2 = await t
        .http()
        .get(`/v1/audit-events?limit=2&starting_after=${page1.body.data[1].id}`)
        .set(as(owner.accessToken));
      const all = await auditOf(owner);
      expect([...page1.body.data, ...page2.body.data]).toEqual(all.slice(0, 4));
      expectError(
        await t.http().get('/v1/audit-events?action=nonsense').set(as(owner.accessToken)),
        400,
        'validation_failed',
      );

      // Admin only, and only the organization's own events.
      const reader = await createApiKey(t, owner.accessToken, ['read_write']);
      expectError(
        await t.http().get('/v1/audit-events').set(as(reader)),
        403,
        'insufficient_scope',
      );
      expectError(await t.http().get('/v1/audit-events'), 401, 'unauthenticated');
      // Another organization's log holds none of these: its own creation alone.
      const stranger = await signUp(t);
      expect(await auditOf(stranger)).toEqual([
        expect.objectContaining({
          action: 'organization.created',
          target: { type: 'organization', id: stranger.organizationId },
        }),
      ]);
    });

    it('writes the event in the transaction of the change: a refused change leaves none', async () => {
      const owner = await signUpVerified(t, smtp);
      expectError(
        await t.http().delete(`/v1/api-keys/${randomUUID()}`).set(as(owner.accessToken)),
        404,
        'not_found',
      );
      expectError(
        await t
          .http()
          .patch(`/v1/organizations/${owner.organizationId}/members/${owner.userId}`)
          .set(as(owner.accessToken))
          .send({ role: 'member' }),
        409,
        'last_owner',
      );
      // Sign-up's own event alone.
      expect((await auditOf(owner)).map((event) => event.action)).toEqual(['organization.created']);
    });

    it('purges events past AUDIT_RETENTION_DAYS, safely from several purgers at once', async () => {
      const owner = await signUpVerified(t, smtp);
      await db.query(
        `INSERT INTO audit_events (organization_id, action, actor_type, actor_id, target_type, target_id, details, created_at)
         SELECT $1, 'api_key.created', 'user', $2, 'api_key', gen_random_uuid()::text, '{}', now() - interval '366 days'
           FROM generate_series(1, 2500)`,
        [owner.organizationId, owner.userId],
      );
      await createApiKey(t, owner.accessToken, ['read']);
      const worker = t.app.get(AuditRetentionWorker);
      const counts = await Promise.all([
        worker.purgeExpired(),
        worker.purgeExpired(),
        worker.purgeExpired(),
      ]);
      const left: Array<{ old: number; recent: number }> = await db.query(
        `SELECT count(*) FILTER (WHERE created_at < now() - interval '365 days')::int AS old,
                count(*) FILTER (WHERE created_at >= now() - interval '365 days')::int AS recent
           FROM audit_events WHERE organization_id = $1`,
        [owner.organizationId],
      );
      // The key's event and sign-up's organization.created.
      expect(left[0]).toEqual({ old: 0, recent: 2 });
      // Other organizations' expired rows (from other tests) may be counted too, never twice.
      expect(counts.reduce((sum, count) => sum + count, 0)).toBeGreaterThanOrEqual(2500);
    });
  });
});
