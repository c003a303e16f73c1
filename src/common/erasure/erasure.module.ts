import { Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { ErasureParticipants } from './erasure-participants';

/** Import it where the erasure runs; a participant's module needs only the decorator. */
@Module({
  imports: [DiscoveryModule],
  providers: [ErasureParticipants],
  exports: [ErasureParticipants],
})
export class ErasureModule {}
