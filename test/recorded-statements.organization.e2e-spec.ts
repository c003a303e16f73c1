import { ApiKeysService } from '../src/api-keys/api-keys.service';
import { AuditService } from '../src/audit/audit.service';
import { Database } from '../src/database/database';
import { sql } from '../src/database/sql';
import type { Role } from '../src/organizations/entities/membership.entity';
import { InvitationMailer } from '../src/organizations/invitation-mailer.service';
import { InvitationsService } from '../src/organizations/invitations.service';
import { MembersService } from '../src/organizations/members.service';
import { SafetySettingsService } from '../src/safety/safety-settings.service';
import { LimitsService } from '../src/spend/limits.service';
import { WebhookEndpointsService } from '../src/webhooks/webhook-endpoints.service';
import { signUp, uniqueEmail, userCaller } from './support/identity';
import { describeRecordedStatements, type RecordedFiles } from './support/recorded-statements';
import type { TestApp } from './support/test-app';

/** Never resolved nor requested: WEBHOOK_ALLOW_PRIVATE_URLS skips the guard's DNS lookup. */
const WEBHOOK_URL = 'https://hooks.example.test/personality';

/** A fresh user owning a fresh organization (through sign-up), with a verified address. */
async function owner(t: TestApp) {
  const user = await signUp(t);
  await t.app
    .get(Database)
    .rows(sql`UPDATE users SET email_verified_at = now() WHERE id = ${user.userId}`);
  return { ...user, caller: userCaller(user.userId, user.organizationId, 'owner') };
}

/** A fresh user (with an organization of their own) made a member of `organizationId`. */
async function member(t: TestApp, organizationId: string, role: Role) {
  const user = await signUp(t);
  await t.app.get(Database).rows(
    sql`INSERT INTO memberships (organization_id, user_id, role)
        VALUES (${organizationId}, ${user.userId}, ${role})`,
  );
  return { ...user, caller: userCaller(user.userId, organizationId, role) };
}

const FILES: RecordedFiles = {
  'members.service.sql': async ({ t, operation }) => {
    const boss = await owner(t);
    const { organizationId } = boss;
    const admin = await member(t, organizationId, 'admin');
    // A key the admin made: demoting them revokes it.
    await t.app.get(ApiKeysService).create(admin.caller, { name: 'admin key', scopes: ['admin'] });
    const members = t.app.get(MembersService);
    const sections = [
      await operation('list, the first page', () => members.list(boss.caller, organizationId, 10)),
      await operation('list, a page after a cursor', () =>
        members.list(boss.caller, organizationId, 10, boss.userId),
      ),
      await operation('change a role: an admin demoted to member (their admin key revoked)', () =>
        members.changeRole(boss.caller, organizationId, admin.userId, 'member'),
      ),
      await operation('change a role: a member promoted to admin', () =>
        members.changeRole(boss.caller, organizationId, admin.userId, 'admin'),
      ),
    ];
    // An admin with a key of their own (only owners and admins make keys): removing them
    // revokes it.
    const leaving = await member(t, organizationId, 'admin');
    await t.app
      .get(ApiKeysService)
      .create(leaving.caller, { name: 'their key', scopes: ['read_write'] });
    sections.push(
      await operation('remove a member (their key revoked)', () =>
        members.remove(boss.caller, organizationId, leaving.userId),
      ),
    );
    return sections;
  },

  'invitations.service.sql': async ({ t, operation }) => {
    const boss = await owner(t);
    const { organizationId } = boss;
    const invitee = await signUp(t);
    const invitations = t.app.get(InvitationsService);
    const mailed = jest.spyOn(t.app.get(InvitationMailer), 'send');
    try {
      const sections = [
        await operation('invite an address', () =>
          invitations.create(boss.caller, organizationId, { email: invitee.email, role: 'member' }),
        ),
        await operation('list, the first page', () =>
          invitations.list(boss.caller, organizationId, 10),
        ),
      ];
      const [, token] = mailed.mock.calls[0] as [unknown, string];
      const caller = userCaller(invitee.userId, invitee.organizationId, 'owner');
      sections.push(
        await operation('accept an invitation', () => invitations.accept(caller, token)),
      );
      const open = await invitations.create(boss.caller, organizationId, {
        email: uniqueEmail('invitee'),
        role: 'admin',
      });
      sections.push(
        await operation('revoke an invitation', () =>
          invitations.revoke(boss.caller, organizationId, open.id),
        ),
      );
      return sections;
    } finally {
      mailed.mockRestore();
    }
  },

  'safety-settings.service.sql': async ({ t, operation }) => {
    // A fresh organization: nothing stored, nothing cached.
    const { organizationId, caller } = await owner(t);
    const settings = t.app.get(SafetySettingsService);
    return [
      await operation('read (none stored: the defaults)', () =>
        settings.get(caller, organizationId),
      ),
      await operation('patch', () =>
        settings.update(caller, organizationId, {
          crisis_response: 'off',
          input_moderation: 'block',
        }),
      ),
    ];
  },

  'limits.service.sql': async ({ t, operation }) => {
    const { organizationId, caller } = await owner(t);
    const limits = t.app.get(LimitsService);
    return [
      await operation('read (none set)', () => limits.get(caller, organizationId)),
      await operation('set the monthly budget and the end users’ rate limit', () =>
        limits.update(caller, organizationId, {
          monthly_token_budget: 1_000_000,
          end_user_rate_limit: { rps: 2, burst: 10 },
        }),
      ),
    ];
  },

  'webhook-endpoints.service.sql': async ({ t, operation }) => {
    const { organizationId, caller } = await owner(t);
    const endpoints = t.app.get(WebhookEndpointsService);
    const created = await endpoints.create(caller, {
      url: `${WEBHOOK_URL}/first`,
      events: ['member.added'],
    });
    const { id } = created;
    const sections = [
      await operation('create', () =>
        endpoints.create(caller, {
          url: WEBHOOK_URL,
          events: ['end_user.created', 'end_user.deleted'],
          description: 'CRM sync',
        }),
      ),
      await operation('list, the first page', () => endpoints.list(organizationId, 10)),
      await operation('update its URL, events and description', () =>
        endpoints.update(caller, id, {
          url: `${WEBHOOK_URL}/second`,
          events: ['member.removed'],
          description: 'Team sync',
        }),
      ),
      await operation('disable (its pending attempts cancelled)', () =>
        endpoints.update(caller, id, { status: 'disabled' }),
      ),
      await operation('enable', () => endpoints.update(caller, id, { status: 'enabled' })),
      await operation('get', () => endpoints.get(organizationId, id)),
      await operation('send a test ping', () => endpoints.ping(organizationId, id)),
      await operation('list its deliveries, the first page', () =>
        endpoints.deliveries(organizationId, id, 10),
      ),
    ];
    const [ping] = (await endpoints.deliveries(organizationId, id, 1)).data;
    sections.push(
      await operation('redeliver a delivery', () => endpoints.redeliver(caller, id, ping.id)),
      await operation('delete', () => endpoints.remove(caller, id)),
    );
    return sections;
  },

  'audit.service.sql': async ({ t, operation }) => {
    const { organizationId, caller } = await owner(t);
    // Two events to list: each endpoint's creation is audited.
    const endpoints = t.app.get(WebhookEndpointsService);
    for (const path of ['a', 'b']) {
      await endpoints.create(caller, { url: `${WEBHOOK_URL}/${path}`, events: ['member.added'] });
    }
    const audit = t.app.get(AuditService);
    const page = await audit.list(organizationId, 1);
    return [
      await operation('list, the first page', () => audit.list(organizationId, 10)),
      await operation('list, a page after a cursor, of one action', () =>
        audit.list(organizationId, 10, page.data[0].id, 'webhook_endpoint.created'),
      ),
    ];
  },
};

/** The organization's settings: its team, safety settings, spend limits, webhooks and audit log. */
describeRecordedStatements(
  'the statements each organization-settings operation sends (src/queries/*.service.sql)',
  FILES,
  { SMTP_URL: undefined, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' },
);
