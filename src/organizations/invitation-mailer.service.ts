import { existsSync } from 'node:fs';
import { join, relative } from 'node:path';
import { MailerService } from '@nestjs-modules/mailer';
import { Injectable, OnModuleInit } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { MAIL_TEMPLATE_DIR, maskAddress } from '../auth/password-reset-mailer.service';
import type { AppConfig } from '../config/app.config';
import type { MailConfig } from '../config/mail.config';

const TEMPLATE_DIR = join(__dirname, 'templates');
/** The HTML template may be an absolute path; the text one is resolved from the mailer's dir. */
const HTML_TEMPLATE = join(TEMPLATE_DIR, 'invitation');
const TEXT_TEMPLATE = relative(MAIL_TEMPLATE_DIR, join(TEMPLATE_DIR, 'invitation.text.hbs'));

/** The link of the e-mail: always APP_PUBLIC_URL, never the request's Host header. */
export function invitationLink(publicUrl: string, token: string): string {
  return `${publicUrl}/accept-invitation?token=${token}`;
}

export interface InvitationMail {
  to: string;
  organization: string;
  inviter: string;
  role: string;
  expiresAt: Date;
}

/**
 * Sends the invitation e-mail through the mailer AuthModule configures (SMTP_URL). Without
 * SMTP_URL it is rendered, not sent, and logged with the token redacted, like the reset mail.
 */
@Injectable()
export class InvitationMailer implements OnModuleInit {
  constructor(
    private readonly mailer: MailerService,
    private readonly config: ConfigService,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(InvitationMailer.name);
  }

  onModuleInit(): void {
    for (const file of ['invitation.hbs', 'invitation.text.hbs']) {
      const path = join(TEMPLATE_DIR, file);
      if (!existsSync(path)) throw new Error(`Mail template missing: ${path}`);
    }
  }

  async send(mail: InvitationMail, token: string): Promise<void> {
    const { publicUrl } = this.config.getOrThrow<AppConfig>('app');
    const { smtpUrl, from } = this.config.getOrThrow<MailConfig>('mail');
    const subject = `Join ${mail.organization} on the Personality API`;
    await this.mailer.sendMail({
      from,
      to: mail.to,
      subject,
      template: HTML_TEMPLATE,
      textTemplate: TEXT_TEMPLATE,
      context: {
        link: invitationLink(publicUrl, token),
        organization: mail.organization,
        inviter: mail.inviter,
        role: mail.role,
        expiresAt: `${mail.expiresAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      },
    });
    if (!smtpUrl) {
      this.logger.info(
        {
          mail: {
            to: maskAddress(mail.to),
            subject,
            link: invitationLink(publicUrl, '[redacted]'),
          },
        },
        'SMTP_URL is unset: invitation mail written to the log instead of sent (token redacted)',
      );
    }
  }
}
