import { Global, Module } from '@nestjs/common';
import { StreamSlots } from './stream-slots.service';

/** The per-organization budget of long responses, shared by every module that streams. */
@Global()
@Module({ providers: [StreamSlots], exports: [StreamSlots] })
export class StreamsModule {}
