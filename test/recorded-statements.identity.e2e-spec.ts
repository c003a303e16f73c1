import { sha256 } from '../src/common/crypto/sha256';
import { AsyncResource } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import { JwtService } from '@nestjs/jwt';
import type { Request } from 'express';
import { generateApiKey } from '../src/api-keys/api-key-format';
import { ApiKeysService } from '../src/api-keys/api-keys.service';
import type { AccessTokenPayload } from '../src/auth/access-tokens.service';
import { AuthService } from '../src/auth/auth.service';
import { EmailVerificationService } from '../src/auth/email-verification.service';
import { PasswordResetService } from '../src/auth/password-reset.service';
import { JwtStrategy } from '../src/auth/strategies/jwt.strategy';
import type { UserCaller } from '../src/common/auth/caller';
import { Database } from '../src/database/database';
import { sql } from '../src/database/sql';
import { OrganizationsService } from '../src/organizations/organizations.service';
import { SsoService } from '../src/sso/sso.service';
import { UsersService } from '../src/users/users.service';
import {
  isVerificationMail,
  signUp,
  type SignedUp,
  uniqueEmail,
  verificationTokenOf,
} from './support/identity';
import { TestOidcProvider } from './support/jwks-server';
import { describeRecordedStatements, type RecordedFiles } from './support/recorded-statements';
import { type CapturedMail, resetTokenOf, TestSmtpServer } from './support/smtp-server';
import type { TestApp } from './support/test-app';
import { eventually } from './support/wait';

/** The mails the specs read tokens from: sign-up's verification links, the reset links. */
let smtp: TestSmtpServer;
/** The OIDC provider `acme` whose id_tokens SSO links and logs in with. */
let idp: TestOidcProvider;

/**
 * What the app is built with besides the harness's settings: filled by this file's beforeAll,
 * which runs before the harness's (it reads `env` when it builds the app).
 */
const env: Record<string, string | undefined> = {};

beforeAll(async () => {
  smtp = await new TestSmtpServer().start();
  idp = await new TestOidcProvider('acme').start();
  env.SMTP_URL = smtp.url;
  env.SSO_PROVIDERS = JSON.stringify([idp.config]);
});

afterAll(async () => {
  await smtp?.stop();
  await idp?.stop();
});

const isResetMail = (mail: CapturedMail) => mail.subject === 'Reset your Personality API password';

/**
 * Runs `work` outside the operation being recorded (bound to the context this module was loaded
 * in): a spec's own look, made while an operation is recorded, is not counted as the operation's.
 */
const unrecorded = AsyncResource.bind(<T>(work: () => Promise<T>): Promise<T> => work());

/** The user of an access token, acting in the organization made at sign-up (owner: admin). */
function asUser(user: SignedUp): UserCaller {
  return {
    kind: 'user',
    userId: user.userId,
    organizationId: user.organizationId,
    scopes: ['admin'],
  };
}

/** The token of the latest verification link mailed to `email`. */
async function verificationToken(email: string): Promise<string> {
  await smtp.waitFor(email, 5_000, isVerificationMail);
  return verificationTokenOf(smtp.mailsTo(email, isVerificationMail).at(-1)!);
}

/** What JwtStrategy makes of an access token, once passport has verified it. */
function authenticateToken(t: TestApp, accessToken: string, organizationId?: string) {
  const payload = t.app.get(JwtService).verify<AccessTokenPayload & { exp: number }>(accessToken);
  const headers = {
    authorization: `Bearer ${accessToken}`,
    ...(organizationId === undefined ? {} : { 'x-organization-id': organizationId }),
  };
  return () => t.app.get(JwtStrategy).validate({ headers } as Request, payload);
}

const FILES: RecordedFiles = {
  'auth.service.sql': async ({ t, operation }) => {
    const auth = t.app.get(AuthService);
    const resets = t.app.get(PasswordResetService);
    const verification = t.app.get(EmailVerificationService);
    const sections = [
      await operation('sign-up, and the verification mail sent after the answer', async () => {
        await auth.signup({
          email: uniqueEmail('signup'),
          password: `correct horse ${randomUUID()}`,
          organization_name: 'Acme Support',
        });
        await verification.idle();
      }),
    ];

    const user = await signUp(t);
    sections.push(
      await operation('login with the right password', () => auth.login(user.email, user.password)),
      await operation('login with a wrong password', () =>
        expect(auth.login(user.email, `${user.password}x`)).rejects.toMatchObject({
          code: 'invalid_credentials',
        }),
      ),
    );

    const forgetful = await signUp(t);
    sections.push(
      await operation('password reset request, and its mail sent after the answer', async () => {
        resets.request(forgetful.email);
        await resets.idle();
      }),
    );
    const resetToken = resetTokenOf(await smtp.waitFor(forgetful.email, 5_000, isResetMail));
    sections.push(
      await operation('password reset with the mailed token', () =>
        resets.reset(resetToken, `battery staple ${randomUUID()}`),
      ),
    );

    const unverified = await signUp(t);
    const token = await verificationToken(unverified.email);
    sections.push(
      await operation('resend of the verification mail', async () => {
        verification.requestLink(unverified.userId);
        await verification.idle();
      }),
      await operation('e-mail verification with the mailed token', () =>
        verification.verify(token),
      ),
    );

    // Fresh users: the token versions are cached a few seconds once read.
    const first = await signUp(t);
    const second = await signUp(t);
    sections.push(
      await operation(
        "an access token's check on each request (JwtStrategy): token version, first organization",
        authenticateToken(t, first.accessToken),
      ),
      await operation(
        "an access token's check on each request (JwtStrategy): token version, X-Organization-Id",
        authenticateToken(t, second.accessToken, second.organizationId),
      ),
    );
    return sections;
  },

  'api-keys.service.sql': async ({ t, operation }) => {
    const keys = t.app.get(ApiKeysService);
    const database = t.app.get(Database);
    const owner = await signUp(t);
    const caller = asUser(owner);
    const rolled = await keys.create(caller, { name: 'Rolled', scopes: ['read_write'] });
    const replaced = await keys.create(caller, { name: 'Replaced', scopes: ['read_write'] });
    const revoked = await keys.create(caller, { name: 'Revoked', scopes: ['read'] });
    let created: Awaited<ReturnType<ApiKeysService['create']>> | undefined;
    const sections = [
      await operation('create', async () => {
        created = await keys.create(caller, { name: 'Support bot', scopes: ['read_write'] });
      }),
      await operation('list', () => keys.list(owner.organizationId, 10)),
      // Renaming also makes this instance forget the key: its next use looks it up.
      await operation('rename', () => keys.update(caller, created!.id, { name: 'Support bot EU' })),
      await operation(
        "a key's check on a request, not cached: the lookup, and last_used_at written off the request",
        async () => {
          expect(await keys.authenticate(created!.key)).toMatchObject({ apiKeyId: created!.id });
          // The write is not awaited by authenticate(): it is awaited here, so it is counted.
          await unrecorded(() =>
            eventually(async () => {
              const row = await database.row<{ last_used_at: Date | null }>(
                sql`SELECT last_used_at FROM api_keys WHERE id = ${created!.id}`,
              );
              return row?.last_used_at ?? undefined;
            }, 'last_used_at written'),
          );
        },
      ),
      await operation('a check of an unknown (well-formed) key', async () => {
        expect(await keys.authenticate(generateApiKey())).toBeNull();
      }),
      await operation('roll, the old key working for an hour more', () =>
        keys.roll(caller, rolled.id, 3600),
      ),
      await operation('roll, the old key revoked at once', () => keys.roll(caller, replaced.id, 0)),
      await operation('revoke', () => keys.revoke(caller, revoked.id)),
    ];
    return sections;
  },

  'organizations.service.sql': async ({ t, operation }) => {
    const organizations = t.app.get(OrganizationsService);
    const owner = await signUp(t);
    return [
      await operation('create', () =>
        organizations.create({ userId: owner.userId, tokenVersion: 0 }, 'Second organization'),
      ),
      await operation("list the user's organizations", () =>
        organizations.listForUser(owner.userId, 10),
      ),
      await operation('set the memory retention', () =>
        organizations.setMemoryRetention(asUser(owner), owner.organizationId, 30),
      ),
      await operation("the organization's own bucket size (the rate limiter's)", () =>
        organizations.rateLimitOverride(owner.organizationId),
      ),
      await operation(
        "whose it is (an HTML conversion's, a heavy document write's, an import slot's, a tool schema check's)",
        () => organizations.accountOf(owner.organizationId),
      ),
    ];
  },

  'sso.service.sql': async ({ t, operation }) => {
    const sso = t.app.get(SsoService);
    const user = await signUp(t);
    const idToken = await idp.idToken({ sub: `sub-${randomUUID()}`, email: 'ada@idp.example' });
    let identityId = '';
    return [
      await operation('link a new identity', async () => {
        identityId = (await sso.link(user.userId, 'acme', idToken)).identity.id;
      }),
      await operation('link it again (the same user)', () =>
        sso.link(user.userId, 'acme', idToken),
      ),
      await operation("list the user's identities", () => sso.list(user.userId, 10)),
      await operation('login with a linked identity', () => sso.login('acme', idToken)),
      await operation('unlink', () => sso.unlink(user.userId, identityId)),
    ];
  },

  'users.service.sql': async ({ t, operation }) => {
    const users = t.app.get(UsersService);
    const user = await signUp(t);
    return [
      await operation('the logged-in user (GET /v1/me)', () => users.findById(user.userId)),
      await operation('sign-out of an access token (POST /v1/auth/logout)', () =>
        users.signOut(user.userId, sha256(user.accessToken), new Date(Date.now() + 3_600_000)),
      ),
    ];
  },
};

/**
 * The identity operations: sign-up, login, resets, the checks of access tokens and API keys,
 * API keys, organizations, SSO. Members and invitations are test/recorded-statements.organization's.
 */
describeRecordedStatements(
  'the statements each identity operation sends (src/queries/*.service.sql)',
  FILES,
  env,
);
