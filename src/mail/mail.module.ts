import { MailerModule, type MailerOptions } from '@nestjs-modules/mailer';
import { HandlebarsAdapter } from '@nestjs-modules/mailer/adapters/handlebars.adapter';
import { Module } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { mailConfig } from '../config/mail.config';
import { MAIL_TEMPLATE_DIR } from './mail-templates';
import { MailService } from './mail.service';

/**
 * Mail: the transport (SMTP_URL), the templates of every mail (src/mail/templates) and the
 * masking of addresses in logs. The modules that send mail (auth, organizations) import it and
 * compose their mails with MailService.
 */
@Module({
  imports: [
    MailerModule.forRootAsync({
      inject: [mailConfig.KEY],
      useFactory: (mail: ConfigType<typeof mailConfig>): MailerOptions => ({
        // Without SMTP_URL the mail is rendered but not sent; MailService logs it.
        transport: mail.smtpUrl ?? { jsonTransport: true },
        template: {
          dir: MAIL_TEMPLATE_DIR,
          adapter: new HandlebarsAdapter(undefined, { inlineCssEnabled: false }),
          options: { strict: true },
        },
      }),
    }),
  ],
  providers: [MailService],
  exports: [MailService],
})
export class MailModule {}
