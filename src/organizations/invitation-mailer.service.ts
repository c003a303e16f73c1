import { Injectable } from '@nestjs/common';
import { MailService } from '../mail/mail.service';

/** The path of the invitation link, under APP_PUBLIC_URL: the console's page that accepts it. */
export const INVITATION_LINK_PATH = '/console/accept-invitation';

/**
 * Fixed: no organization-supplied text in a subject (contract §25), so that an organization
 * named like a bank's security team cannot put its message in the inbox list.
 */
export const INVITATION_SUBJECT = 'You are invited to join an organization on the Personality API';

export interface InvitationMail {
  to: string;
  /** The organization's name: text its members chose, quoted in the body only. */
  organization: string;
  /** The inviter's (verified) address: who invited whom is said in the service's own words. */
  inviterEmail: string;
  role: string;
  expiresAt: Date;
}

/**
 * Sends the invitation e-mail (MailService: SMTP_URL, or a log line with the token redacted when
 * it is unset, like the reset mail). Its first sentence is the service's own, naming who invited
 * whom by their addresses; the organization's name follows it, as plain text.
 */
@Injectable()
export class InvitationMailer {
  constructor(private readonly mail: MailService) {}

  async send(mail: InvitationMail, token: string): Promise<void> {
    await this.mail.send({
      to: mail.to,
      subject: INVITATION_SUBJECT,
      template: 'invitation',
      link: { path: INVITATION_LINK_PATH, token },
      context: {
        inviterEmail: mail.inviterEmail,
        inviteeEmail: mail.to,
        organization: mail.organization,
        role: mail.role,
        expiresAt: `${mail.expiresAt.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
      },
      kind: 'invitation',
    });
  }
}
