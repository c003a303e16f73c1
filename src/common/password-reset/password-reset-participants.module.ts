import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { PasswordResetParticipants } from './password-reset-participants';

/** Import it where the reset runs; a participant's module needs only the decorator. */
@Module({
  imports: [DiscoveryModule],
  providers: [PasswordResetParticipants],
  exports: [PasswordResetParticipants],
})
export class PasswordResetParticipantsModule {}
