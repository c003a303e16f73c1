import { Injectable, OnModuleInit } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { MailService } from '../mail/mail.service';
import {
  type DisabledEndpoint,
  FailingEndpointsWorker,
} from '../webhooks/failing-endpoints.worker';
import { auditedUrl } from '../webhooks/webhook-url';
import { MembersRepository } from './members.repository';

const SUBJECT = 'A webhook endpoint of yours was disabled';

/**
 * E-mails the owners and admins of an organization when the service disabled one of its webhook
 * endpoints for failing (contract §25), naming it by id and origin. The webhooks module decides
 * and reports each disabling once; who manages an organization is this module's knowledge, hence
 * the listener here.
 */
@Injectable()
export class DisabledEndpointsNotifier implements OnModuleInit {
  constructor(
    private readonly failingEndpoints: FailingEndpointsWorker,
    private readonly members: MembersRepository,
    private readonly mail: MailService,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(DisabledEndpointsNotifier.name);
  }

  onModuleInit(): void {
    this.failingEndpoints.onDisabled((endpoints) => this.notify(endpoints));
  }

  private async notify(endpoints: DisabledEndpoint[]): Promise<void> {
    for (const endpoint of endpoints) {
      for (const manager of await this.members.managers(endpoint.organizationId)) {
        // One failed mail does not keep the others from going out.
        await this.mail
          .send({
            to: manager.email,
            subject: SUBJECT,
            template: 'webhook-endpoint-disabled',
            context: {
              endpointId: endpoint.id,
              // Its origin only: the rest of a URL often holds the receiver's credentials (a
              // Slack or Zapier hook's path, a `?token=`), and a mail outlives a rotated URL in
              // every mailbox it reaches. The managers read the whole URL from the API.
              origin: auditedUrl(endpoint.url),
              failingSince: `${endpoint.failingSince.toISOString().slice(0, 16).replace('T', ' ')} UTC`,
            },
            kind: 'disabled webhook endpoint',
            log: { userId: manager.id, webhookEndpointId: endpoint.id },
          })
          .catch((error: unknown) =>
            this.logger.error(
              { err: error, userId: manager.id, webhookEndpointId: endpoint.id },
              'disabled webhook endpoint mail could not be sent',
            ),
          );
      }
    }
  }
}
