import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MailerService } from '@nestjs-modules/mailer';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import type { AppConfig } from '../config/app.config';
import type { AuthConfig } from '../config/auth.config';
import type { MailConfig } from '../config/mail.config';

/** Beside this file, in src/ and in dist/ (the nest-cli.json asset rule for templates copies them). */
export const MAIL_TEMPLATE_DIR = join(__dirname, 'templates');
const HTML_TEMPLATE = 'password-reset';
const TEXT_TEMPLATE = 'password-reset.text.hbs';
export const MAIL_TEMPLATE_FILES = [`${HTML_TEMPLATE}.hbs`, TEXT_TEMPLATE];
const SUBJECT = 'Reset your Personality API password';

/** The link of the e-mail: always APP_PUBLIC_URL, never the request's Host header. */
export function resetLink(publicUrl: string, token: string): string {
  return `${publicUrl}/reset-password?token=${token}`;
}

/** `ada@example.com` → `a***@example.com`: enough to follow a mail in the log, not to harvest. */
export function maskAddress(address: string): string {
  const at = address.lastIndexOf('@');
  return at <= 0 ? '***' : `${address[0]}***${address.slice(at)}`;
}

/**
 * Sends the password reset e-mail through @nestjs-modules/mailer (SMTP_URL). Without SMTP_URL the
 * mail is rendered but not sent, and the log gets one line saying so, with the link's token
 * redacted: a reset token in a log would let anyone who reads the logs take over the account.
 */
@Injectable()
export class PasswordResetMailer implements OnModuleInit {
  constructor(
    private readonly mailer: MailerService,
    private readonly config: ConfigService,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(PasswordResetMailer.name);
  }

  /** The mailer's text template silently falls back to no text: refuse to start instead. */
  onModuleInit(): void {
    for (const file of MAIL_TEMPLATE_FILES) {
      const path = join(MAIL_TEMPLATE_DIR, file);
      if (!existsSync(path)) throw new Error(`Mail template missing: ${path}`);
    }
  }

  async send(to: string, userId: string, token: string): Promise<void> {
    const { publicUrl } = this.config.getOrThrow<AppConfig>('app');
    const { resetTokenTtlSeconds } = this.config.getOrThrow<AuthConfig>('auth');
    const { smtpUrl, from } = this.config.getOrThrow<MailConfig>('mail');
    await this.mailer.sendMail({
      from,
      to,
      subject: SUBJECT,
      template: HTML_TEMPLATE,
      textTemplate: TEXT_TEMPLATE,
      context: {
        link: resetLink(publicUrl, token),
        ttlMinutes: Math.round(resetTokenTtlSeconds / 60),
      },
    });
    if (smtpUrl) {
      this.logger.info({ userId }, 'password reset mail sent');
    } else {
      this.logger.info(
        {
          userId,
          mail: {
            to: maskAddress(to),
            subject: SUBJECT,
            link: resetLink(publicUrl, '[redacted]'),
          },
        },
        'SMTP_URL is unset: password reset mail written to the log instead of sent (token redacted)',
      );
    }
  }
}
