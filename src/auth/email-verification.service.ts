import { randomBytes } from 'node:crypto';
import { Injectable } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { sha256 } from '../common/crypto/sha256';
import { AppError } from '../common/errors/app-error';
import { Clock } from '../common/time/clock';
import { Database } from '../database/database';
import { MailService } from '../mail/mail.service';
import { UsersService } from '../users/users.service';
import { EmailVerificationTokensRepository } from './email-verification-tokens.repository';
import { VerificationMailer } from './verification-mailer.service';

/** How long a verification link works: a day, to survive a night and a busy inbox. */
export const VERIFICATION_TOKEN_TTL_SECONDS = 24 * 3600;
/** At most this many verification mails to one user per hour (counted as for resets). */
export const VERIFICATION_MAILS_PER_HOUR = 5;
/** 32 bytes from the CSPRNG, base64url: 256 bits, 43 characters. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{43}$/;

const invalidToken = () =>
  AppError.validation(
    [{ field: 'token', problem: 'is unknown, expired or already used' }],
    'The verification token is unknown, expired or already used',
  );

/**
 * E-mail verification (contract §25): sign-up mails a link whose token (256 random bits, only
 * its SHA-256 stored, used once, valid VERIFICATION_TOKEN_TTL_SECONDS) proves the address the
 * user's; inviting needs it. Mails are sent after the request is answered.
 */
@Injectable()
export class EmailVerificationService {
  constructor(
    private readonly database: Database,
    private readonly tokens: EmailVerificationTokensRepository,
    private readonly users: UsersService,
    private readonly mail: MailService,
    private readonly mailer: VerificationMailer,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(EmailVerificationService.name);
  }

  /** Resolves once every verification mail requested so far is sent, capped or failed. */
  idle(): Promise<void> {
    return this.mail.idle();
  }

  /** Mails a new link to the user, after the current request; not when they are verified. */
  requestLink(userId: string): void {
    this.mail.later('verification mail', () => this.issueAndSend(userId));
  }

  /** Spends the token and marks its user's address verified; 400 `validation_failed` else. */
  async verify(token: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) throw invalidToken();
    await this.database.transaction(async (manager) => {
      const now = this.clock.now();
      const tokenHash = sha256(token);
      // The user's row first (the UPDATE locks it), then the links, as a password reset does:
      // two links used at once wait at the row; spending its own link first, each waited for
      // the other's in spendAllOf, a deadlock (found by review).
      const userId = await this.tokens.ownerOf(manager, tokenHash, now);
      if (userId === null) throw invalidToken();
      await this.users.markEmailVerified(manager, userId, now);
      // Spent meanwhile by the verification that held the row before: refused, undone.
      if ((await this.tokens.spend(manager, tokenHash, now)) !== userId) throw invalidToken();
      // Other links still in the mailbox have nothing left to prove.
      await this.tokens.spendAllOf(manager, userId, now);
    });
  }

  private async issueAndSend(userId: string): Promise<void> {
    const user = await this.users.findById(userId);
    if (!user || user.emailVerifiedAt) return;
    const token = randomBytes(32).toString('base64url');
    const now = this.clock.nowMs();
    const issued = await this.tokens.insertUnderHourlyCap({
      userId,
      tokenHash: sha256(token),
      at: new Date(now),
      expiresAt: new Date(now + VERIFICATION_TOKEN_TTL_SECONDS * 1000),
      hourlyCap: VERIFICATION_MAILS_PER_HOUR,
    });
    if (!issued) {
      this.logger.info({ userId }, 'verification mail not sent: hourly cap reached');
      return;
    }
    await this.mailer.send(user.email, userId, VERIFICATION_TOKEN_TTL_SECONDS / 3600, token);
  }
}
