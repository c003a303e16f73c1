import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ReplyParticipants } from './reply-participants';

/** Import it where replies are written; a participant's module needs only the decorator. */
@Module({
  imports: [DiscoveryModule],
  providers: [ReplyParticipants],
  exports: [ReplyParticipants],
})
export class ReplyParticipantsModule {}
