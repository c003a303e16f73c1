import { randomBytes } from 'node:crypto';
import { sha256 } from '../common/crypto/sha256';
import { Inject, Injectable, OnApplicationShutdown } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Logger } from 'pino';
import { DataSource } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import type { AuthConfig } from '../config/auth.config';
import { UsersService } from '../users/users.service';
import { LoginAttemptsService } from './login-attempts.service';
import { hashPassword } from './passwords';
import { PasswordResetMailer } from './password-reset-mailer.service';

/**
 * At most this many reset mails per user per hour, so forgot-password cannot flood a mailbox. A
 * soft cap (simultaneous requests may pass it by a few); the per-IP auth bucket is the hard one.
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
export class PasswordResetService implements OnApplicationShutdown {
  /** Mails still being prepared or sent, awaited at shutdown so none is cut off half-way. */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    private readonly users: UsersService,
    private readonly loginAttempts: LoginAttemptsService,
    private readonly mailer: PasswordResetMailer,
    private readonly config: ConfigService,
    @Inject(ROOT_LOGGER) private readonly logger: Logger,
  ) {}

  /**
   * Returns at once and does the work (look-up, token, SMTP) afterwards, so the answer takes the
   * same time whether or not the address has an account.
   */
  request(email: string): void {
    const work = new Promise<void>((resolve) => setImmediate(resolve))
      .then(() => this.issueAndSend(email))
      .catch((error: unknown) =>
        this.logger.error({ err: error }, 'password reset mail could not be sent'),
      )
      .finally(() => this.pending.delete(work));
    this.pending.add(work);
  }

  async onApplicationShutdown(): Promise<void> {
    await Promise.allSettled([...this.pending]);
  }

  private async issueAndSend(email: string): Promise<void> {
    const user = await this.users.findByEmail(email);
    if (!user) return;
    const { resetTokenTtlSeconds } = this.config.getOrThrow<AuthConfig>('auth');
    const token = randomBytes(32).toString('base64url');
    const issued: unknown[] = await this.dataSource.query(
      `INSERT INTO password_reset_tokens (user_id, token_hash, expires_at)
       SELECT $1, $2, now() + make_interval(secs => $3)
        WHERE (SELECT count(*) FROM password_reset_tokens
                WHERE user_id = $1 AND created_at > now() - interval '1 hour') < $4
       RETURNING id`,
      [user.id, hashToken(token), resetTokenTtlSeconds, RESET_MAILS_PER_HOUR],
    );
    if (issued.length === 0) {
      this.logger.info({ userId: user.id }, 'password reset mail not sent: hourly cap reached');
      return;
    }
    await this.mailer.send(user.email, user.id, token);
  }

  /**
   * Uses the token once: the atomic `UPDATE … WHERE used_at IS NULL AND expires_at > now()` lets
   * exactly one of any number of concurrent uses through. The password, the token version (which
   * ends earlier access tokens) and the lockout change in the same transaction.
   */
  async reset(token: string, newPassword: string): Promise<void> {
    if (!TOKEN_PATTERN.test(token)) throw invalidToken();
    const tokenHash = hashToken(token);
    // A cheap look first, so garbage tokens cost no argon2 hash.
    const live: unknown[] = await this.dataSource.query(
      `SELECT 1 FROM password_reset_tokens
        WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()`,
      [tokenHash],
    );
    if (live.length === 0) throw invalidToken();
    const passwordHash = await hashPassword(newPassword);

    const userId = await this.dataSource.transaction(async (manager) => {
      const used: Array<{ user_id: string }> = await manager.query(
        `WITH used AS (
           UPDATE password_reset_tokens SET used_at = now()
            WHERE token_hash = $1 AND used_at IS NULL AND expires_at > now()
            RETURNING user_id)
         SELECT user_id FROM used`,
        [tokenHash],
      );
      if (used.length === 0) throw invalidToken();
      const { user_id } = used[0];
      const email = await this.users.replacePassword(manager, user_id, passwordHash);
      if (email === null) throw invalidToken();
      await this.loginAttempts.clear(manager, email);
      // Any other link still in a mailbox is spent too: the password it would reset is gone.
      await manager.query(
        `UPDATE password_reset_tokens SET used_at = now() WHERE user_id = $1 AND used_at IS NULL`,
        [user_id],
      );
      return user_id;
    });
    await this.users.forgetTokenVersion(userId);
    this.logger.info({ userId }, 'password reset completed');
  }
}
