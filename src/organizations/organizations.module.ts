import { Module } from '@nestjs/common';
import { ApiKeysModule } from '../api-keys/api-keys.module';
import { AuditModule } from '../audit/audit.module';
import { WebhooksModule } from '../webhooks/webhooks.module';
import { MailModule } from '../mail/mail.module';
import { UsersModule } from '../users/users.module';
import { DisabledEndpointsNotifier } from './disabled-endpoints-notifier';
import { InvitationMailer } from './invitation-mailer.service';
import { InvitationsController } from './invitations.controller';
import { InvitationsRepository } from './invitations.repository';
import { InvitationsService } from './invitations.service';
import { MembersController } from './members.controller';
import { MembersRepository } from './members.repository';
import { MembersService } from './members.service';
import { OrganizationAccess } from './organization-access';
import { OrganizationsController } from './organizations.controller';
import { OrganizationsRepository } from './organizations.repository';
import { OrganizationsService } from './organizations.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [IdempotencyModule, UsersModule, AuditModule, WebhooksModule, MailModule, ApiKeysModule],
  controllers: [OrganizationsController, MembersController, InvitationsController],
  providers: [
    OrganizationsRepository,
    OrganizationsService,
    MembersRepository,
    MembersService,
    InvitationsRepository,
    InvitationsService,
    InvitationMailer,
    OrganizationAccess,
    DisabledEndpointsNotifier,
  ],
  exports: [OrganizationsService, OrganizationAccess],
})
export class OrganizationsModule {}
