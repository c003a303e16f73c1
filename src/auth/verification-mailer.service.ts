import { Injectable } from '@nestjs/common';
import { MailService } from '../mail/mail.service';

const SUBJECT = 'Verify your e-mail address for the Personality API';
/** The path of the verification link, under APP_PUBLIC_URL: the console's page that verifies it. */
export const VERIFICATION_LINK_PATH = '/console/verify-email';

/** The verification e-mail (MailService: SMTP_URL, or a log line with the token redacted). */
@Injectable()
export class VerificationMailer {
  constructor(private readonly mail: MailService) {}

  async send(to: string, userId: string, ttlHours: number, token: string): Promise<void> {
    await this.mail.send({
      to,
      subject: SUBJECT,
      template: 'verify-email',
      link: { path: VERIFICATION_LINK_PATH, token },
      context: { ttlHours },
      kind: 'verification',
      log: { userId },
    });
  }
}
