import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { MailerService } from '@nestjs-modules/mailer';
import { Inject, Injectable, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PinoLogger } from 'nestjs-pino';
import { appConfig } from '../config/app.config';
import { mailConfig } from '../config/mail.config';
import { MAIL_TEMPLATE_DIR, MAIL_TEMPLATE_FILES, type MailTemplate } from './mail-templates';
import { maskAddress } from '../common/logging/mask-address';

/** A link of a mail that carries a secret token: `APP_PUBLIC_URL` + `path` + `?token=…`. */
export interface TokenLink {
  path: string;
  token: string;
}

/** The link of a mail: always APP_PUBLIC_URL, never the request's Host header. */
export function linkTo(publicUrl: string, link: TokenLink): string {
  return `${publicUrl}${link.path}?token=${link.token}`;
}

export interface OutgoingMail {
  to: string;
  subject: string;
  template: MailTemplate;
  /** The template's variables (`link` is added when the mail has one). */
  context: Record<string, unknown>;
  /** A link with a secret token: given to the template as `link`, never logged whole. */
  link?: TokenLink;
  /** What the mail is, for log lines: `password reset`, `invitation`… */
  kind: string;
  /** Fields for the log lines about this mail: ids only, never an address or a token. */
  log?: Record<string, unknown>;
}

/**
 * Sends the service's mails through @nestjs-modules/mailer (SMTP_URL), with one set of templates
 * (src/mail/templates) and one rule for logs: a log line names a mail's recipient masked
 * (`a***@example.com`) and its link with the token redacted, since anyone who can read the logs
 * could otherwise take over accounts. Without SMTP_URL a mail is rendered but not sent, and one
 * log line says so.
 */
@Injectable()
export class MailService implements OnModuleInit, OnApplicationShutdown {
  /** Mail work started by `later`, awaited at shutdown so none is cut off half-way. */
  private readonly pending = new Set<Promise<void>>();

  constructor(
    private readonly mailer: MailerService,
    @Inject(appConfig.KEY) private readonly app: ConfigType<typeof appConfig>,
    @Inject(mailConfig.KEY) private readonly mail: ConfigType<typeof mailConfig>,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(MailService.name);
  }

  /** The mailer's text template silently falls back to no text: refuse to start instead. */
  onModuleInit(): void {
    for (const file of MAIL_TEMPLATE_FILES) {
      const path = join(MAIL_TEMPLATE_DIR, file);
      if (!existsSync(path)) throw new Error(`Mail template missing: ${path}`);
    }
  }

  /**
   * Runs `work` (look-ups, a token, the SMTP conversation) after the current request has been
   * answered, so that the answer and its timing say nothing of it (whether an address has an
   * account, whether a mail went out). A failure is logged as `what`.
   */
  later(what: string, work: () => Promise<void>): void {
    const job = new Promise<void>((resolve) => setImmediate(resolve))
      .then(work)
      .catch((error: unknown) => this.logger.error({ err: error }, `${what} failed`))
      .finally(() => this.pending.delete(job));
    this.pending.add(job);
  }

  /** Resolves once every mail work started by `later` so far has ended. */
  async idle(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.idle();
  }

  async send(mail: OutgoingMail): Promise<void> {
    const { publicUrl } = this.app;
    await this.mailer.sendMail({
      from: this.mail.from,
      to: mail.to,
      subject: mail.subject,
      template: mail.template,
      textTemplate: `${mail.template}.text.hbs`,
      context: mail.link ? { ...mail.context, link: linkTo(publicUrl, mail.link) } : mail.context,
    });
    if (this.mail.smtpUrl) {
      this.logger.info({ ...mail.log, to: maskAddress(mail.to) }, `${mail.kind} mail sent`);
      return;
    }
    this.logger.info(
      {
        ...mail.log,
        mail: {
          to: maskAddress(mail.to),
          subject: mail.subject,
          ...(mail.link
            ? { link: linkTo(publicUrl, { path: mail.link.path, token: '[redacted]' }) }
            : {}),
        },
      },
      `SMTP_URL is unset: ${mail.kind} mail written to the log instead of sent (token redacted)`,
    );
  }
}
