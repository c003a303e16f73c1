import { randomBytes } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { sha256 } from '../common/crypto/sha256';
import { AppError } from '../common/errors/app-error';
import { PasswordResetParticipants } from '../common/password-reset/password-reset-participants';
import { Clock } from '../common/time/clock';
import { authConfig } from '../config/auth.config';
import { Database } from '../database/database';
import { UsersService } from '../users/users.service';
import { LoginAttemptsService } from './login-attempts.service';
import { MailService } from '../mail/mail.service';
import { PasswordResetMailer } from './password-reset-mailer.service';
import { PasswordResetTokensRepository } from './password-reset-tokens.repository';
import { hashPassword } from './passwords';

/**
 * At most this many reset mails per user per hour, so forgot-password cannot flood a mailbox: one
 * request of a user is counted at a time, and one asked while another is counted is refused
 * (OneTimeTokensRepository.insertUnderHourlyCap).
 */
export const RESET_MAILS_PER_HOUR = 5;
/** 32 bytes from the CSPRNG, base64url: 256 bits, 43 characters. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const invalidToken = () =>
  new AppError('invalid_reset_token', 'The reset token is unknown, expired or already used');

function hashToken(token: string): Buffer {
  return sha256(token);
}

@Injectable()
export class PasswordResetService {
  constructor(
    private readonly database: Database,
    private readonly tokens: PasswordResetTokensRepository,
    private readonly users: UsersService,
    private readonly participants: PasswordResetParticipants,
    private readonly loginAttempts: LoginAttemptsService,
    private readonly mailer: PasswordResetMailer,
    private readonly mail: MailService,
    @Inject(authConfig.KEY) private readonly auth: ConfigType<typeof authConfig>,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(PasswordResetService.name);
  }

  /**
   * Returns at once and does the work (look-up, token, SMTP) afterwards, so the answer takes the
   * same time whether or not the address has an account. Sends are awaited at shutdown.
   */
  request(rawEmail: string): void {
    const email = rawEmail.trim();
    this.mail.later('password reset mail', () => this.issueAndSend(email));
  }

  /**
   * When password login for `email` has just been locked (contract §25): the account, if any,
   * is mailed once, with a reset link (a reset lifts the lock). Outside the hourly cap of
   * forgot-password and its lock: a lock happens at most once a day per address, and its notice
   * is not dropped because a forgot-password of the same user is being counted.
   */
  sendLockoutNotice(email: string): void {
    this.mail.later('lockout notice', async () => {
      const user = await this.users.findByEmail(email);
      if (!user) return;
      const { token, stored } = this.newToken(user.id);
      await this.tokens.insert(stored);
      await this.mailer.sendLockoutNotice(user.email, user.id, token);
    });
  }

  /** Resolves once every mail requested so far is sent, capped or failed. */
  async idle(): Promise<void> {
    await this.mail.idle();
  }

  private async issueAndSend(email: string): Promise<void> {
    const user = await this.users.findByEmail(email);
    if (!user) return;
    const { token, stored } = this.newToken(user.id);
    const issued = await this.tokens.insertUnderHourlyCap({
      ...stored,
      hourlyCap: RESET_MAILS_PER_HOUR,
    });
    if (!issued) {
      this.logger.info({ userId: user.id }, 'password reset mail not sent: hourly cap reached');
      return;
    }
    await this.mailer.send(user.email, user.id, token);
  }

  /** A new reset token for the user, and the row that stores it as its hash. */
  private newToken(userId: string) {
    const token = randomBytes(32).toString('base64url');
    const now = this.clock.nowMs();
    const stored = {
      userId,
      tokenHash: hashToken(token),
      at: new Date(now),
      expiresAt: new Date(now + this.auth.resetTokenTtlSeconds * 1000),
    };
    return { token, stored };
  }

  /**
   * Uses the token once (PasswordResetTokensRepository.spend lets exactly one of any number of
   * concurrent uses through). The password, the token version (which ends earlier access tokens)
   * and the lockout change in the same transaction.
   */
  async reset(token: string, newPassword: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) throw invalidToken();
    const tokenHash = hashToken(token);
    // A cheap look first, so garbage tokens cost no argon2 hash.
    if (!(await this.tokens.isLive(tokenHash, this.clock.now()))) throw invalidToken();
    const passwordHash = await hashPassword(newPassword);

    const { userId, afterCommit } = await this.database.transaction(async (manager) => {
      const now = this.clock.now();
      // The user's row first (replacePassword locks it), then the links: two resets of one user
      // with two links wait for each other there. Spending its own link first, each then
      // waited for the other's in spendAllOf: a deadlock (found by review).
      const owner = await this.tokens.ownerOf(manager, tokenHash, now);
      if (owner === null) throw invalidToken();
      const replaced = await this.users.replacePassword(manager, owner, passwordHash, now);
      if (replaced === null) throw invalidToken();
      // Spent meanwhile by the reset that held the row before: this one is refused, undone.
      if ((await this.tokens.spend(manager, tokenHash, now)) !== owner) throw invalidToken();
      await this.loginAttempts.clear(manager, replaced.email);
      // Any other link still in a mailbox is spent too: the password it would reset is gone.
      await this.tokens.spendAllOf(manager, owner, now);
      // The account is taken back: what the modules keep of whoever held it goes
      // (@TakesAccountBack: SSO identities, and keys made before a first verification).
      const reset = { userId: owner, wasVerified: replaced.was_verified };
      return { userId: owner, afterCommit: await this.participants.takeBack(manager, reset) };
    });
    await this.users.forgetTokenVersion(userId);
    for (const then of afterCommit) await then();
    this.logger.info({ userId }, 'password reset completed');
  }
}
