import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { authConfig } from '../config/auth.config';
import { MailService } from '../mail/mail.service';
import { LOCK_DURATION_SECONDS, LOCKOUT_THRESHOLD } from './login-attempts.service';

const SUBJECT = 'Reset your Personality API password';
const LOCKOUT_SUBJECT = 'Password login to your Personality API account is locked';

/** The path of the reset link, under APP_PUBLIC_URL: the console's page that asks for the new password. */
export const RESET_LINK_PATH = '/console/reset-password';

/**
 * The password reset e-mail (MailService: SMTP_URL, or a log line with the token redacted when
 * it is unset: a reset token in a log would let anyone who reads the logs take over the account).
 */
@Injectable()
export class PasswordResetMailer {
  constructor(
    private readonly mail: MailService,
    @Inject(authConfig.KEY) private readonly auth: ConfigType<typeof authConfig>,
  ) {}

  async send(to: string, userId: string, token: string): Promise<void> {
    await this.mail.send({
      to,
      subject: SUBJECT,
      template: 'password-reset',
      link: { path: RESET_LINK_PATH, token },
      context: { ttlMinutes: Math.round(this.auth.resetTokenTtlSeconds / 60) },
      kind: 'password reset',
      log: { userId },
    });
  }

  /** The lockout notice: login is locked, and a reset link lifts the lock. */
  async sendLockoutNotice(to: string, userId: string, token: string): Promise<void> {
    await this.mail.send({
      to,
      subject: LOCKOUT_SUBJECT,
      template: 'lockout-notice',
      link: { path: RESET_LINK_PATH, token },
      context: {
        ttlMinutes: Math.round(this.auth.resetTokenTtlSeconds / 60),
        failures: LOCKOUT_THRESHOLD,
        lockHours: LOCK_DURATION_SECONDS / 3600,
      },
      kind: 'lockout notice',
      log: { userId },
    });
  }
}
