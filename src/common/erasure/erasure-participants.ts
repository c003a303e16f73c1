import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import { type ErasureParticipant, TakesPartInErasure } from './erasure-participant';

/** Every provider marked @TakesPartInErasure(), in the order they run. */
@Injectable()
export class ErasureParticipants implements OnModuleInit {
  private participants: readonly ErasureParticipant[] = [];

  constructor(private readonly discovery: DiscoveryService) {}

  /** After every provider is built, so participants of modules built later are found too. */
  onModuleInit(): void {
    const found = this.discovery
      .getProviders({ metadataKey: TakesPartInErasure.KEY })
      .map((wrapper) => wrapper.instance as ErasureParticipant);
    const names = new Set<string>();
    for (const { name } of found) {
      if (names.has(name)) throw new Error(`two erasure participants are named ${name}`);
      names.add(name);
    }
    this.participants = found.sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
  }

  get inOrder(): readonly ErasureParticipant[] {
    return this.participants;
  }
}
