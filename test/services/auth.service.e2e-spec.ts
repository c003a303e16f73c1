import { randomUUID } from 'node:crypto';
import { JwtService } from '@nestjs/jwt';
import type { TestingModule } from '@nestjs/testing';
import type { Request } from 'express';
import type { AccessTokenPayload } from '../../src/auth/access-tokens.service';
import { AccessTokensService, JWT_ISSUER } from '../../src/auth/access-tokens.service';
import { AuthModule } from '../../src/auth/auth.module';
import { AuthService } from '../../src/auth/auth.service';
import { EmailVerificationService } from '../../src/auth/email-verification.service';
import { LOCKOUT_THRESHOLD, LoginAttemptsService } from '../../src/auth/login-attempts.service';
import { PasswordResetMailer } from '../../src/auth/password-reset-mailer.service';
import { PasswordResetTokensRepository } from '../../src/auth/password-reset-tokens.repository';
import { PasswordResetService } from '../../src/auth/password-reset.service';
import { JwtStrategy } from '../../src/auth/strategies/jwt.strategy';
import { VerificationMailer } from '../../src/auth/verification-mailer.service';
import { sha256 } from '../../src/common/crypto/sha256';
import { AppError } from '../../src/common/errors/app-error';
import { Clock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { toMeResponse } from '../../src/users/dto/me.dto';
import { UsersModule } from '../../src/users/users.module';
import { UsersRepository } from '../../src/users/users.repository';
import { UsersService } from '../../src/users/users.service';
import { expectAppError } from '../support/assertions';
import { stopClockAt } from '../support/clocks';
import { sessionsWaitingForLocks } from '../support/locks';
import { moduleAlone } from '../support/module-alone';

const RESET_TTL_SECONDS = 3_600;
const JWT_TTL_SECONDS = 900;
const HOUR_MS = 3_600_000;
const DAY_MS = 24 * HOUR_MS;
const PASSWORD = 'correct horse battery staple';

/**
 * The auth and users modules alone on a real PostgreSQL, without HTTP ("medium" spec): the rules
 * of docs/identity.md and contract §6/§25 called through AuthService, LoginAttemptsService,
 * PasswordResetService, EmailVerificationService, AccessTokensService (with JwtStrategy, which
 * checks the tokens it issues) and UsersService. Tokens are read from the mailers' calls (no
 * SMTP_URL: the mails themselves are only logged); time is moved with the injected Clock.
 */
describe('Auth and users services (real database)', () => {
  let moduleRef: TestingModule;
  let auth: AuthService;
  let attempts: LoginAttemptsService;
  let resets: PasswordResetService;
  let verification: EmailVerificationService;
  let accessTokens: AccessTokensService;
  let users: UsersService;
  let strategy: JwtStrategy;
  let jwt: JwtService;
  let database: Database;
  let clock: Clock;
  let resetMailed: jest.SpyInstance;
  let lockoutMailed: jest.SpyInstance;
  let verificationMailed: jest.SpyInstance;

  beforeAll(async () => {
    moduleRef = await moduleAlone([AuthModule, UsersModule], {
      SMTP_URL: undefined,
      REDIS_URL: undefined,
      RESET_TOKEN_TTL_SECONDS: String(RESET_TTL_SECONDS),
      JWT_TTL_SECONDS: String(JWT_TTL_SECONDS),
    });
    auth = moduleRef.get(AuthService);
    attempts = moduleRef.get(LoginAttemptsService);
    resets = moduleRef.get(PasswordResetService);
    verification = moduleRef.get(EmailVerificationService);
    accessTokens = moduleRef.get(AccessTokensService);
    users = moduleRef.get(UsersService);
    strategy = moduleRef.get(JwtStrategy);
    jwt = moduleRef.get(JwtService);
    database = moduleRef.get(Database);
    clock = moduleRef.get(Clock);
  });
  beforeEach(() => {
    resetMailed = jest.spyOn(moduleRef.get(PasswordResetMailer), 'send');
    lockoutMailed = jest.spyOn(moduleRef.get(PasswordResetMailer), 'sendLockoutNotice');
    verificationMailed = jest.spyOn(moduleRef.get(VerificationMailer), 'send');
  });
  afterEach(() => jest.restoreAllMocks());
  afterAll(() => moduleRef?.close());

  const freshEmail = () => `user-${randomUUID()}@example.test`;

  /** Signs up through AuthService; answers the sign-up and the verification token it mailed. */
  async function signUp(email = freshEmail(), password = PASSWORD) {
    verificationMailed.mockClear();
    const answer = await auth.signup({ email, password, name: 'Ada' });
    await verification.idle();
    expect(verificationMailed).toHaveBeenCalledTimes(1);
    const [to, userId, , token] = verificationMailed.mock.calls[0] as [
      string,
      string,
      number,
      string,
    ];
    expect({ to, userId }).toEqual({ to: email, userId: answer.user.id });
    return { ...answer, email, password, verificationToken: token };
  }

  /** Asks for a reset link through PasswordResetService; answers the token mailed. */
  async function resetToken(email: string): Promise<string> {
    resetMailed.mockClear();
    resets.request(email);
    await resets.idle();
    expect(resetMailed).toHaveBeenCalledTimes(1);
    return (resetMailed.mock.calls[0] as [string, string, string])[2];
  }

  /** What JwtStrategy makes of an access token: passport's verification, then validate(). */
  /** What JwtStrategy answers for the token, sent as passport-jwt reads it (the header). */
  function authenticate(accessToken: string, headers: Record<string, string> = {}) {
    const payload = jwt.verify<AccessTokenPayload & { exp: number }>(accessToken);
    return strategy.validate(
      { headers: { authorization: `Bearer ${accessToken}`, ...headers } } as unknown as Request,
      payload,
    );
  }

  async function userRow(id: string) {
    const row = await database.row<{
      password_hash: string;
      token_version: number;
      email_verified_at: Date | null;
    }>(sql`SELECT password_hash, token_version, email_verified_at FROM users WHERE id = ${id}`);
    return row!;
  }

  async function tokenRows(
    table: 'password_reset_tokens' | 'email_verification_tokens',
    id: string,
  ) {
    const statement =
      table === 'password_reset_tokens'
        ? sql`SELECT token_hash, used_at, expires_at, created_at FROM password_reset_tokens
               WHERE user_id = ${id} ORDER BY created_at`
        : sql`SELECT token_hash, used_at, expires_at, created_at FROM email_verification_tokens
               WHERE user_id = ${id} ORDER BY created_at`;
    return database.rows<{
      token_hash: Buffer;
      used_at: Date | null;
      expires_at: Date;
      created_at: Date;
    }>(statement);
  }

  /** The AppError codes of the rejected outcomes (anything else shows as itself). */
  function rejectedCodes(outcomes: Array<PromiseSettledResult<unknown>>): unknown[] {
    return outcomes.flatMap((outcome) =>
      outcome.status === 'rejected'
        ? [outcome.reason instanceof AppError ? outcome.reason.code : outcome.reason]
        : [],
    );
  }

  /** Fails `count` password logins for `email`, each answered invalid_credentials. */
  async function failLogins(email: string, count: number): Promise<void> {
    for (let i = 0; i < count; i++) {
      await expectAppError(auth.login(email, 'wrong password, clearly'), 'invalid_credentials');
    }
  }

  it('stores the password as argon2id at the documented cost, never in plaintext; logs in with it whatever the address case', async () => {
    const email = `Mixed-${randomUUID()}@Example.test`;
    const { user } = await signUp(email);
    const { password_hash } = await userRow(user.id);
    expect(password_hash.startsWith('$argon2id$v=19$')).toBe(true);
    // OWASP's minimum: 19 MiB, 2 passes, 1 lane (in whatever order the encoder writes them).
    const parameters = password_hash.split('$')[3].split(',').sort();
    expect(parameters).toEqual(['m=19456', 'p=1', 't=2']);
    expect(password_hash).not.toContain(PASSWORD);
    // No column of the row holds the password (plaintext or trivially encoded).
    const [whole] = await database.rows<{ text: string }>(
      sql`SELECT row_to_json(u)::text AS text FROM users u WHERE id = ${user.id}`,
    );
    expect(whole.text).not.toContain(PASSWORD);
    expect(whole.text).not.toContain(Buffer.from(PASSWORD).toString('base64'));

    const login = await auth.login(`  ${email.toUpperCase()} `, PASSWORD);
    expect(login).toEqual({
      access_token: expect.any(String),
      token_type: 'Bearer',
      expires_in: JWT_TTL_SECONDS,
    });
    expect((await authenticate(login.access_token)).userId).toBe(user.id);
    await expectAppError(auth.login(email, `${PASSWORD} `), 'invalid_credentials');
    await expectAppError(auth.login(`nobody-${email}`, PASSWORD), 'invalid_credentials');
  });

  it('makes one account of simultaneous sign-ups of one address in any case; the rest are email_taken', async () => {
    const local = `race-${randomUUID()}`;
    const variants = [
      `${local}@example.test`,
      `${local.toUpperCase()}@EXAMPLE.TEST`,
      `${local}@Example.Test`,
      ` ${local}@example.test `,
      `${local.toUpperCase()}@example.test`,
    ];
    const outcomes = await Promise.allSettled(
      variants.map((email, i) => auth.signup({ email, password: `${PASSWORD} ${i}` })),
    );
    await verification.idle();
    const won = outcomes.filter((outcome) => outcome.status === 'fulfilled');
    expect(won).toHaveLength(1);
    expect(rejectedCodes(outcomes)).toEqual(Array(outcomes.length - 1).fill('email_taken'));
    const rows = await database.rows<{ id: string }>(
      sql`SELECT id FROM users WHERE lower(email) = lower(${`${local}@example.test`})`,
    );
    expect(rows).toHaveLength(1);
    // Only the winner's organization exists: the losers' transactions left nothing behind.
    const memberships = await database.rows<{ organization_id: string }>(
      sql`SELECT organization_id FROM memberships WHERE user_id = ${rows[0].id}`,
    );
    expect(memberships).toHaveLength(1);
    // The one account has the winner's password.
    const winner = variants.findIndex((_, i) => outcomes[i].status === 'fulfilled');
    await expect(auth.login(variants[3], `${PASSWORD} ${winner}`)).resolves.toBeDefined();
  });

  it(`lets the ${LOCKOUT_THRESHOLD}th attempt in with the right password: no lock, no notice`, async () => {
    const { email } = await signUp();
    await failLogins(email, LOCKOUT_THRESHOLD - 1);
    await expect(auth.login(email, PASSWORD)).resolves.toBeDefined();
    await resets.idle();
    expect(lockoutMailed).not.toHaveBeenCalled();
    expect(
      await database.rows(sql`SELECT 1 FROM login_attempts WHERE email = lower(${email})`),
    ).toEqual([]);
    await expect(auth.login(email, PASSWORD)).resolves.toBeDefined();
  });

  it(`locks at the ${LOCKOUT_THRESHOLD}th failure within 24 h (any case), mails one notice, refuses even the right password, and lifts the lock 24 h later by the clock`, async () => {
    const { email, user } = await signUp();
    const lockedAt = Date.parse('2031-03-01T10:00:00.000Z');
    stopClockAt(clock, lockedAt - HOUR_MS);
    await failLogins(email, LOCKOUT_THRESHOLD - 2);
    stopClockAt(clock, lockedAt);
    // The address is the same whatever the case and the spaces around it.
    await failLogins(` ${email.toUpperCase()}`, 1);
    await resets.idle();
    expect(lockoutMailed).not.toHaveBeenCalled();
    // The threshold-th failure still answers invalid_credentials, and sets the lock.
    await failLogins(email, 1);
    await expectAppError(auth.login(email, PASSWORD), 'login_locked');
    await expectAppError(auth.login(email, 'wrong password, clearly'), 'login_locked');
    await resets.idle();
    expect(lockoutMailed).toHaveBeenCalledTimes(1);
    expect(lockoutMailed.mock.calls[0].slice(0, 2)).toEqual([email, user.id]);

    stopClockAt(clock, lockedAt + DAY_MS - 1);
    await expectAppError(auth.login(email, PASSWORD), 'login_locked');
    stopClockAt(clock, lockedAt + DAY_MS);
    await expect(auth.login(email, PASSWORD)).resolves.toBeDefined();
    // The success cleared the count: a fresh run of failures starts from nothing.
    const rows = await database.rows(
      sql`SELECT 1 FROM login_attempts WHERE email = lower(${email})`,
    );
    expect(rows).toEqual([]);
    await resets.idle();
    expect(lockoutMailed).toHaveBeenCalledTimes(1);
  });

  it('counts failures for unknown addresses too, on a rolling window, and mails nobody', async () => {
    const email = freshEmail();
    const start = Date.parse('2031-04-01T00:00:00.000Z');
    // 20 failures 2 hours apart: never more than 12 inside one 24-hour span, so no lock.
    const spread = LOCKOUT_THRESHOLD + 5;
    for (let i = 0; i < spread; i++) {
      stopClockAt(clock, start + i * 2 * HOUR_MS);
      await expectAppError(auth.login(email, PASSWORD), 'invalid_credentials');
    }
    // At +40 h the failures younger than 24 hours are those of +18 h … +38 h: 11. Three more
    // answer invalid_credentials, and the next, the 15th inside the window, sets the lock.
    stopClockAt(clock, start + spread * 2 * HOUR_MS);
    const live = 11;
    await failLogins(email, LOCKOUT_THRESHOLD - live - 1);
    await expectAppError(auth.login(email, PASSWORD), 'invalid_credentials');
    await expectAppError(auth.login(email, PASSWORD), 'login_locked');
    await resets.idle();
    expect(lockoutMailed).not.toHaveBeenCalled();
    // The gate alone says the same: refused, and not the attempt that set the lock.
    await expect(attempts.begin(email)).resolves.toEqual({ refused: true, lockedNow: false });
  });

  it('stores a reset token only as its SHA-256, lets exactly one of concurrent uses through, and ends earlier access tokens and the lock', async () => {
    const { email, user, access_token: before } = await signUp();
    stopClockAt(clock, Date.parse('2031-05-01T08:00:00.000Z'));
    // Cached: the reset must end it at once all the same.
    expect((await authenticate(before)).userId).toBe(user.id);
    await failLogins(email, LOCKOUT_THRESHOLD);
    await expectAppError(auth.login(email, PASSWORD), 'login_locked');
    await resets.idle();
    lockoutMailed.mockClear();

    const token = await resetToken(email);
    expect(token).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const stored = await tokenRows('password_reset_tokens', user.id);
    // Two: the lockout notice's link and this one. Neither holds the token itself.
    expect(stored).toHaveLength(2);
    expect(stored[1].token_hash.equals(sha256(token))).toBe(true);
    expect(stored[1].expires_at.getTime() - stored[1].created_at.getTime()).toBe(
      RESET_TTL_SECONDS * 1000,
    );
    const tables = await database.rows<{ text: string }>(
      sql`SELECT row_to_json(t)::text AS text FROM password_reset_tokens t
           WHERE user_id = ${user.id}`,
    );
    for (const row of tables) expect(row.text).not.toContain(token);

    const passwords = Array.from({ length: 6 }, (_, i) => `new password number ${i}`);
    const outcomes = await Promise.allSettled(
      passwords.map((password) => resets.reset(token, password)),
    );
    const winners = passwords.filter((_, i) => outcomes[i].status === 'fulfilled');
    expect(winners).toHaveLength(1);
    expect(rejectedCodes(outcomes)).toEqual(Array(outcomes.length - 1).fill('invalid_reset_token'));
    expect((await userRow(user.id)).token_version).toBe(1);
    await expectAppError(resets.reset(token, 'yet another password'), 'invalid_reset_token');

    // The access token from before the reset is refused; the lock is gone; only the new password works.
    await expectAppError(authenticate(before), 'unauthenticated');
    await expectAppError(auth.login(email, PASSWORD), 'invalid_credentials');
    const after = await auth.login(email, winners[0]);
    expect((await authenticate(after.access_token)).userId).toBe(user.id);
    // The lockout notice's link, still in the mailbox, was spent by the reset.
    expect((await tokenRows('password_reset_tokens', user.id)).every((row) => row.used_at)).toBe(
      true,
    );
  });

  it('passes the hourly cap by none, however many are asked for at once: one counts, the rest are refused', async () => {
    const { user } = await signUp();
    const tokens = moduleRef.get(PasswordResetTokensRepository);
    const at = new Date('2031-05-02T08:00:00.000Z');
    const ask = (index: number) =>
      tokens.insertUnderHourlyCap({
        userId: user.id,
        tokenHash: sha256(`concurrent-${index}`),
        at,
        expiresAt: new Date(at.getTime() + 3_600_000),
        hourlyCap: 3,
      });
    // The user's row held, so that the first insert stays in flight (its foreign key waits)
    // while the others ask.
    let release!: () => void;
    let locked!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    const holding = new Promise<void>((resolve) => (locked = resolve));
    const holder = database.transaction(async (manager) => {
      await database.count(sql`SELECT 1 FROM users WHERE id = ${user.id} FOR UPDATE`, {
        manager,
      });
      locked();
      await held;
    });
    await Promise.race([holding, holder]);
    const first = ask(0);
    await sessionsWaitingForLocks(database, 1);
    const others = await Promise.all([1, 2, 3, 4, 5].map(ask));
    release();
    await holder;
    expect(await first).toBe(true);
    expect(others).toEqual([false, false, false, false, false]);
    // Asked one after another, each counts the ones before: two more, then the cap.
    const afterwards: boolean[] = [];
    for (const index of [6, 7, 8, 9]) afterwards.push(await ask(index));
    expect(afterwards).toEqual([true, true, false, false]);
    const [row] = await database.rows<{ n: number }>(
      sql`SELECT count(*)::int AS n FROM password_reset_tokens WHERE user_id = ${user.id}`,
    );
    expect(row.n).toBe(3);
  });

  it('expires a reset token RESET_TOKEN_TTL_SECONDS after it was issued, by the clock', async () => {
    const { email, user } = await signUp();
    const issuedAt = Date.parse('2031-06-01T12:00:00.000Z');
    stopClockAt(clock, issuedAt);
    const expired = await resetToken(email);
    stopClockAt(clock, issuedAt + RESET_TTL_SECONDS * 1000);
    await expectAppError(resets.reset(expired, 'a brand new password'), 'invalid_reset_token');

    const lateIssue = issuedAt + RESET_TTL_SECONDS * 1000;
    const live = await resetToken(email);
    const spare = await resetToken(email);
    stopClockAt(clock, lateIssue + RESET_TTL_SECONDS * 1000 - 1);
    await resets.reset(live, 'a brand new password');
    // Every other link of the user was spent with it.
    await expectAppError(resets.reset(spare, 'another new password'), 'invalid_reset_token');
    await expectAppError(resets.reset('x'.repeat(43), 'whatever it is'), 'invalid_reset_token');
    await expectAppError(resets.reset(`${live}!`, 'whatever it is'), 'invalid_reset_token');
    await expect(auth.login(email, 'a brand new password')).resolves.toBeDefined();
    expect((await userRow(user.id)).token_version).toBe(1);
  });

  it('verifies the address with a mailed token stored as its hash, once, even when used concurrently; other links are spent with it', async () => {
    const verifiedAt = Date.parse('2031-07-01T09:30:00.000Z');
    stopClockAt(clock, verifiedAt - HOUR_MS);
    const { user, verificationToken } = await signUp();
    expect(toMeResponse((await users.findById(user.id))!).email_verified).toBe(false);
    const stored = await tokenRows('email_verification_tokens', user.id);
    expect(stored).toHaveLength(1);
    expect(stored[0].token_hash.equals(sha256(verificationToken))).toBe(true);

    verificationMailed.mockClear();
    verification.requestLink(user.id);
    await verification.idle();
    const second = (verificationMailed.mock.calls[0] as [string, string, number, string])[3];
    expect(second).not.toBe(verificationToken);

    stopClockAt(clock, verifiedAt);
    const outcomes = await Promise.allSettled(
      Array.from({ length: 5 }, () => verification.verify(verificationToken)),
    );
    expect(outcomes.filter((outcome) => outcome.status === 'fulfilled')).toHaveLength(1);
    expect(rejectedCodes(outcomes)).toEqual(Array(outcomes.length - 1).fill('validation_failed'));
    expect((await userRow(user.id)).email_verified_at?.getTime()).toBe(verifiedAt);
    expect(toMeResponse((await users.findById(user.id))!).email_verified).toBe(true);

    stopClockAt(clock, verifiedAt + HOUR_MS);
    await expectAppError(verification.verify(second), 'validation_failed');
    await expectAppError(verification.verify(verificationToken), 'validation_failed');
    // The first verification's time is kept, and a verified user is mailed no more links.
    expect((await userRow(user.id)).email_verified_at?.getTime()).toBe(verifiedAt);
    verificationMailed.mockClear();
    verification.requestLink(user.id);
    await verification.idle();
    expect(verificationMailed).not.toHaveBeenCalled();
  });

  it('expires a verification link after 24 hours by the clock', async () => {
    const issuedAt = Date.parse('2031-08-01T00:00:00.000Z');
    stopClockAt(clock, issuedAt);
    const { user, verificationToken } = await signUp();
    stopClockAt(clock, issuedAt + DAY_MS);
    await expectAppError(verification.verify(verificationToken), 'validation_failed');
    expect((await userRow(user.id)).email_verified_at).toBeNull();
  });

  it('issues access tokens of the user’s token version; JwtStrategy refuses another version, a vanished user and a foreign organization', async () => {
    const { user, organization, access_token } = await signUp();
    const claims = jwt.decode<AccessTokenPayload & Record<string, unknown>>(access_token);
    expect(claims).toEqual(
      expect.objectContaining({ sub: user.id, ver: 0, iss: JWT_ISSUER, aud: expect.anything() }),
    );
    expect((claims.exp as number) - (claims.iat as number)).toBe(JWT_TTL_SECONDS);
    await expect(authenticate(access_token)).resolves.toEqual({
      kind: 'user',
      userId: user.id,
      tokenVersion: 0,
      // What a sign-out ends: the token by its hash, until it expires.
      token: { hash: sha256(access_token), expiresAt: new Date((claims.exp as number) * 1000) },
      organizationId: organization.id,
      scopes: ['admin'],
    });

    // A token of a version the user does not have (forged claims aside, signed by us).
    await expectAppError(
      authenticate(accessTokens.issue(user.id, 1).access_token),
      'unauthenticated',
    );
    // A user that does not exist.
    await expectAppError(
      authenticate(accessTokens.issue(randomUUID(), 0).access_token),
      'unauthenticated',
    );
    // An organization the user does not belong to.
    const other = await signUp();
    await expectAppError(
      authenticate(access_token, { 'x-organization-id': other.organization.id }),
      'not_a_member',
    );
    // Raising the version (what a reset does) ends the token at once, cache or not.
    await database.transaction((manager) =>
      users.replacePassword(manager, user.id, 'not-a-hash', clock.now()),
    );
    await users.forgetTokenVersion(user.id);
    await expectAppError(authenticate(access_token), 'unauthenticated');
  });

  it('refuses a token signed out of, at once, cache or not; the user’s other tokens go on', async () => {
    const { user, access_token } = await signUp();
    const other = accessTokens.issue(user.id, 0).access_token;
    // Both held by the cache as not signed out of.
    await authenticate(access_token);
    await authenticate(other);
    const payload = jwt.decode<{ exp: number }>(access_token);
    await users.signOut(user.id, sha256(access_token), new Date(payload.exp * 1000));
    await expectAppError(authenticate(access_token), 'unauthenticated');
    await expect(authenticate(other)).resolves.toMatchObject({ userId: user.id });
    // A request whose header holds no token is no caller, whatever payload it comes with.
    await expectAppError(
      strategy.validate({ headers: {} } as Request, jwt.verify(other)),
      'unauthenticated',
    );
  });

  it('never keeps a token version read before a reset: the ended tokens stay ended', async () => {
    const { user, access_token } = await signUp();
    // A request's cache miss reads version 0, and is slow to answer; a reset commits meanwhile.
    const repository = moduleRef.get(UsersRepository);
    const read = repository.tokenVersion.bind(repository);
    let answerRead!: () => void;
    const held = new Promise<void>((resolve) => (answerRead = resolve));
    jest.spyOn(repository, 'tokenVersion').mockImplementationOnce(async (id: string) => {
      const version = await read(id);
      await held;
      return version;
    });
    const slow = users.tokenVersion(user.id);
    await new Promise((resolve) => setImmediate(resolve));
    await database.transaction((manager) =>
      users.replacePassword(manager, user.id, 'not-a-hash', clock.now()),
    );
    await users.forgetTokenVersion(user.id);
    answerRead();
    expect(await slow).toBe(0);

    // The old version was not kept: the token issued before the reset is refused.
    expect(await users.tokenVersion(user.id)).toBe(1);
    await expectAppError(authenticate(access_token), 'unauthenticated');
  });
});
