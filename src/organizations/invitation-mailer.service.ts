import { Injectable } from '@nestjs/common';
import { MailService } from '../mail/mail.service';

/** The path of the invitation link, under APP_PUBLIC_URL. */
export const INVITATION_LINK_PATH = '/accept-invitation';

export interface InvitationMail {
  to: string;
  organization: string;
  inviter: string;
  role: string;
  expiresAt: Date;
}

/**
 * Sends the invitation e-mail (MailService: SMTP_URL, or a log line with the token redacted when
 * it is unset, like the reset mail).
 */
@Injectable()
export class InvitationMailer {
  constructor(private readonly mail: MailService) {}

  async send(mail: InvitationMail, token: string): Promise<void> {
    await this.mail.send({
      to: mail.to,
      subject: `Join ${mail.organization} on the Personality API`,
      template: 'invitation',
      link: { path: INVITATION_LINK_PATH, token },
      context: {
        organization: mail.organization,
        inviter: mail.inviter,
        role: mail.role,
        expiresAt: `${mail.expiresAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      },
      kind: 'invitation',
    });
  }
}
