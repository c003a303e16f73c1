import { randomUUID } from 'node:crypto';
import { getDataSourceToken } from '@nestjs/typeorm';
import type { DataSource } from 'typeorm';
import { AuthService } from '../src/auth/auth.service';
import {
  FAILURE_WINDOW_SECONDS,
  LOCK_DURATION_SECONDS,
  LOCKOUT_THRESHOLD,
  LoginAttemptsService,
} from '../src/auth/login-attempts.service';
import { PasswordResetMailer } from '../src/auth/password-reset-mailer.service';
import { VerificationMailer } from '../src/auth/verification-mailer.service';
import {
  EmailVerificationService,
  VERIFICATION_TOKEN_TTL_SECONDS,
} from '../src/auth/email-verification.service';
import { PasswordResetService, RESET_MAILS_PER_HOUR } from '../src/auth/password-reset.service';
import type { UserCaller } from '../src/common/auth/caller';
import { Clock, ManualClock } from '../src/common/time/clock';
import {
  InvitationMailer,
  type InvitationMail,
} from '../src/organizations/invitation-mailer.service';
import { InvitationsService } from '../src/organizations/invitations.service';
import { expectAppError } from './support/assertions';
import { uniqueEmail } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';

const SECOND = 1000;
const HOUR = 3600 * SECOND;

/** Resolves with the next token mailed to `to`. */
class MailCatcher<Args extends unknown[]> {
  private readonly tokens = new Map<string, string[]>();
  private readonly waiting = new Map<string, (token: string) => void>();

  constructor(private readonly addressOf: (...args: Args) => string) {}

  send = (...args: Args): Promise<void> => {
    const to = this.addressOf(...args);
    const token = args[args.length - 1] as string;
    const resolve = this.waiting.get(to);
    if (resolve) {
      this.waiting.delete(to);
      resolve(token);
    } else this.tokens.set(to, [...(this.tokens.get(to) ?? []), token]);
    return Promise.resolve();
  };

  /** Tokens mailed to `to` that no next() has taken yet. */
  queued(to: string): number {
    return this.tokens.get(to)?.length ?? 0;
  }

  next(to: string): Promise<string> {
    const queued = this.tokens.get(to)?.shift();
    if (queued) return Promise.resolve(queued);
    return new Promise((resolve) => this.waiting.set(to, resolve));
  }
}

/**
 * Service specs on the real database: the rules that depend on time (the login lockout, the
 * reset token's expiry and hourly cap, the invitation's expiry) with a ManualClock moved by hand,
 * never a sleep. The e2e specs check the same rules over HTTP at the current time.
 */
describe('Identity rules over time (ManualClock, real PostgreSQL)', () => {
  const clock = new ManualClock(Date.parse('2026-06-01T12:00:00Z'));
  const resetMails = new MailCatcher((to: string, _userId: string, _token: string) => to);
  const lockoutMails = new MailCatcher((to: string, _userId: string, _token: string) => to);
  const verificationMails = new MailCatcher(
    (to: string, _userId: string, _ttlHours: number, _token: string) => to,
  );
  const invitationMails = new MailCatcher((mail: InvitationMail, _token: string) => mail.to);
  let t: TestApp;
  let attempts: LoginAttemptsService;
  let resets: PasswordResetService;
  let auth: AuthService;
  let invitations: InvitationsService;
  let verification: EmailVerificationService;

  beforeAll(async () => {
    t = await createTestApp({
      override: (builder) =>
        builder
          .overrideProvider(Clock)
          .useValue(clock)
          .overrideProvider(PasswordResetMailer)
          .useValue({ send: resetMails.send, sendLockoutNotice: lockoutMails.send })
          .overrideProvider(VerificationMailer)
          .useValue({ send: verificationMails.send })
          .overrideProvider(InvitationMailer)
          .useValue({ send: invitationMails.send }),
    });
    attempts = t.app.get(LoginAttemptsService);
    resets = t.app.get(PasswordResetService);
    auth = t.app.get(AuthService);
    invitations = t.app.get(InvitationsService);
    verification = t.app.get(EmailVerificationService);
  });
  afterAll(async () => {
    await t?.close();
  });

  const password = () => `a long password ${randomUUID()}`;

  async function signUp(email = uniqueEmail('clock')) {
    const secret = password();
    const signed = await auth.signup({ email, password: secret });
    const caller: UserCaller = {
      kind: 'user',
      userId: signed.user.id,
      organizationId: signed.organization.id,
      scopes: ['admin'],
    };
    return { email, password: secret, caller };
  }

  /** Verifies the user's address with the link mailed at sign-up. */
  async function verified<U extends { email: string }>(user: U): Promise<U> {
    await verification.verify(await verificationMails.next(user.email));
    return user;
  }

  async function failures(email: string, count: number): Promise<boolean[]> {
    const refused: boolean[] = [];
    for (let i = 0; i < count; i++) refused.push((await attempts.begin(email)).refused);
    return refused;
  }

  describe('login lockout (15 failures within 24 h lock for 24 h)', () => {
    it('lets the 15th failure through and refuses from the 16th, for 24 hours', async () => {
      const email = uniqueEmail('lockout');
      expect(await failures(email, LOCKOUT_THRESHOLD)).toEqual(
        Array<boolean>(LOCKOUT_THRESHOLD).fill(false),
      );
      expect((await attempts.begin(email)).refused).toBe(true);
      clock.advance(LOCK_DURATION_SECONDS * SECOND - SECOND);
      expect((await attempts.begin(email.toUpperCase())).refused).toBe(true);
      clock.advance(2 * SECOND);
      // The lock is over: this attempt is counted again (the first of a new series).
      expect((await attempts.begin(email)).refused).toBe(false);
    });

    it('counts only the failures of the last 24 hours', async () => {
      const email = uniqueEmail('window');
      await failures(email, LOCKOUT_THRESHOLD - 1);
      clock.advance(FAILURE_WINDOW_SECONDS * SECOND + SECOND);
      // The 14 earlier failures have left the window: 14 more do not lock.
      expect(await failures(email, LOCKOUT_THRESHOLD - 1)).not.toContain(true);
      expect((await attempts.begin(email)).refused).toBe(false);
      // That was the 15th within the window: now it is locked.
      expect((await attempts.begin(email)).refused).toBe(true);
    });

    it('a rolling window: failures spread over more than 24 hours never lock', async () => {
      const email = uniqueEmail('rolling');
      for (let i = 0; i < 3 * LOCKOUT_THRESHOLD; i++) {
        expect((await attempts.begin(email)).refused).toBe(false);
        clock.advance(Math.ceil((FAILURE_WINDOW_SECONDS * SECOND) / (LOCKOUT_THRESHOLD - 1)));
      }
    });

    it('a successful login clears the count, and login answers 423 while locked', async () => {
      const user = await signUp();
      await failures(user.email, LOCKOUT_THRESHOLD - 1);
      await expect(auth.login(user.email, user.password)).resolves.toMatchObject({
        token_type: 'Bearer',
      });
      expect(await failures(user.email, LOCKOUT_THRESHOLD - 1)).not.toContain(true);
      await expectAppError(auth.login(user.email, 'wrong password'), 'invalid_credentials');
      await expectAppError(auth.login(user.email, user.password), 'login_locked');
      clock.advance(LOCK_DURATION_SECONDS * SECOND + SECOND);
      await expect(auth.login(` ${user.email} `, user.password)).resolves.toMatchObject({
        token_type: 'Bearer',
      });
    });

    it('prunes rows untouched for a whole window, and only those', async () => {
      const old = uniqueEmail('old');
      const recent = uniqueEmail('recent');
      await failures(old, LOCKOUT_THRESHOLD);
      clock.advance(LOCK_DURATION_SECONDS * SECOND + SECOND);
      await failures(recent, LOCKOUT_THRESHOLD);
      // More made-up addresses than one batch of the purge deletes (1,000): it goes on until none.
      const database = t.app.get<DataSource>(getDataSourceToken());
      const madeUp = `made-up-${randomUUID()}`;
      await database.query(
        `INSERT INTO login_attempts (email, updated_at)
         SELECT $1 || '-' || n || '@example.com', $2::timestamptz FROM generate_series(1, 1500) n`,
        [madeUp, new Date(clock.nowMs() - LOCK_DURATION_SECONDS * SECOND - SECOND)],
      );
      // (The purge's timer may have taken some of them first: what is left is what counts.)
      await attempts.prune();
      const rows: Array<{ email: string }> = await database.query(
        `SELECT email FROM login_attempts WHERE email = ANY($1) OR email LIKE $2 || '%'`,
        [[old, recent], madeUp],
      );
      expect(rows.map((row) => row.email)).toEqual([recent]);
    });
  });

  describe('password reset tokens', () => {
    it('work until they expire (RESET_TOKEN_TTL_SECONDS, 1 hour by default), then not', async () => {
      const user = await signUp();
      resets.request(user.email);
      const token = await resetMails.next(user.email);
      clock.advance(HOUR - SECOND);
      const late = await signUp();
      resets.request(` ${late.email.toUpperCase()} `);
      const lateToken = await resetMails.next(late.email);
      clock.advance(2 * SECOND);
      await expectAppError(resets.reset(token, password()), 'invalid_reset_token');
      const newPassword = password();
      await expect(resets.reset(lateToken, newPassword)).resolves.toBeUndefined();
      await expect(auth.login(late.email, newPassword)).resolves.toMatchObject({
        token_type: 'Bearer',
      });
    });

    it('a reset lifts the lockout and spends every other link of the user', async () => {
      const user = await signUp();
      await failures(user.email, LOCKOUT_THRESHOLD + 1);
      await expectAppError(auth.login(user.email, user.password), 'login_locked');
      resets.request(user.email);
      const first = await resetMails.next(user.email);
      resets.request(user.email);
      const second = await resetMails.next(user.email);
      const newPassword = password();
      await resets.reset(second, newPassword);
      await expect(auth.login(user.email, newPassword)).resolves.toMatchObject({
        token_type: 'Bearer',
      });
      await expectAppError(resets.reset(first, password()), 'invalid_reset_token');
      await expectAppError(resets.reset(second, password()), 'invalid_reset_token');
    });

    it(`sends at most ${RESET_MAILS_PER_HOUR} links an hour, and more once the hour has passed`, async () => {
      const user = await signUp();
      for (let i = 0; i < RESET_MAILS_PER_HOUR; i++) {
        resets.request(user.email);
        await resetMails.next(user.email);
        clock.advance(SECOND);
      }
      resets.request(user.email);
      await resets.idle(); // awaits every request still being worked on
      expect(resetMails.queued(user.email)).toBe(0);
      clock.advance(HOUR);
      resets.request(user.email);
      const token = await resetMails.next(user.email);
      await expect(resets.reset(token, password())).resolves.toBeUndefined();
    });
  });

  describe('e-mail verification (links valid 24 hours)', () => {
    it('verifies with a link younger than 24 h; an expired or used link is validation_failed', async () => {
      const user = await signUp();
      const expired = await verificationMails.next(user.email);
      clock.advance(VERIFICATION_TOKEN_TTL_SECONDS * SECOND);
      await expectAppError(verification.verify(expired), 'validation_failed');
      verification.requestLink(user.caller.userId);
      const fresh = await verificationMails.next(user.email);
      clock.advance(VERIFICATION_TOKEN_TTL_SECONDS * SECOND - SECOND);
      await expect(verification.verify(fresh)).resolves.toBeUndefined();
      await expectAppError(verification.verify(fresh), 'validation_failed');
      // Verified: no further link is sent.
      verification.requestLink(user.caller.userId);
      await verification.idle();
      expect(verificationMails.queued(user.email)).toBe(0);
    });
  });

  describe('the lockout notice', () => {
    it('is sent by the attempt that sets the lock only, once per lock', async () => {
      const user = await signUp();
      const locked: boolean[] = [];
      for (let i = 0; i < LOCKOUT_THRESHOLD + 3; i++) {
        locked.push((await attempts.begin(user.email)).lockedNow);
      }
      expect(locked.map((value, i) => (value ? i + 1 : 0)).filter(Boolean)).toEqual([
        LOCKOUT_THRESHOLD,
      ]);
      // Through login, the notice goes to the account with a reset link.
      const other = await signUp();
      for (let i = 0; i < LOCKOUT_THRESHOLD; i++) {
        await expectAppError(auth.login(other.email, 'not the password'), 'invalid_credentials');
      }
      const token = await lockoutMails.next(other.email);
      await expectAppError(auth.login(other.email, other.password), 'login_locked');
      await resets.idle();
      expect(lockoutMails.queued(other.email)).toBe(0);
      // Its link resets the password, which lifts the lock.
      const newPassword = password();
      await resets.reset(token, newPassword);
      await expect(auth.login(other.email, newPassword)).resolves.toMatchObject({
        token_type: 'Bearer',
      });
    });

    it('goes out while a forgot-password of the same user is being counted', async () => {
      const user = await signUp();
      // The lock a forgot-password holds while it counts the user's reset mails of the hour.
      const counting = t.app.get<DataSource>(getDataSourceToken()).createQueryRunner();
      await counting.connect();
      try {
        await counting.startTransaction();
        await counting.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
          `password_reset_tokens:${user.caller.userId}`,
        ]);
        for (let i = 0; i < LOCKOUT_THRESHOLD; i++) {
          await expectAppError(auth.login(user.email, 'not the password'), 'invalid_credentials');
        }
        await resets.idle();
        expect(lockoutMails.queued(user.email)).toBe(1);
      } finally {
        if (counting.isTransactionActive) await counting.rollbackTransaction();
        await counting.release();
      }
      await resets.reset(await lockoutMails.next(user.email), password());
    });
  });

  describe('invitations', () => {
    it('expire after INVITATION_TTL_SECONDS (7 days by default): listed as expired, refused', async () => {
      const owner = await verified(await signUp());
      const invitee = await signUp();
      const early = await invitations.create(owner.caller, owner.caller.organizationId, {
        email: invitee.email,
        role: 'member',
      });
      expect(early.status).toBe('pending');
      expect(Date.parse(early.expires_at) - clock.nowMs()).toBe(7 * 24 * HOUR);
      const expiredToken = await invitationMails.next(invitee.email);
      clock.advance(7 * 24 * HOUR);
      const page = await invitations.list(owner.caller, owner.caller.organizationId, 10);
      expect(page.data.map((row) => [row.id, row.status])).toEqual([[early.id, 'expired']]);
      await expectAppError(invitations.accept(invitee.caller, expiredToken), 'invalid_invitation');

      // Inviting again replaces the expired invitation with a live one.
      const again = await invitations.create(owner.caller, owner.caller.organizationId, {
        email: invitee.email,
        role: 'member',
      });
      const token = await invitationMails.next(invitee.email);
      clock.advance(7 * 24 * HOUR - SECOND);
      await expect(invitations.accept(invitee.caller, token)).resolves.toMatchObject({
        id: owner.caller.organizationId,
        role: 'member',
      });
      const after = await invitations.list(owner.caller, owner.caller.organizationId, 10);
      expect(after.data.map((row) => [row.id, row.status])).toEqual([[again.id, 'accepted']]);
    });
  });
});
