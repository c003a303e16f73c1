import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import {
  type EraseEndUsers,
  type ErasureParticipant,
  type ErasureStep,
  ErasesEndUsers,
} from './erasure-participant';

/** Every provider method marked @ErasesEndUsers(), in the order they run. */
@Injectable()
export class ErasureParticipants implements OnModuleInit {
  private participants: readonly ErasureParticipant[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  /** After every provider is built, so participants of modules built later are found too. */
  onModuleInit(): void {
    const found: ErasureParticipant[] = [];
    for (const wrapper of this.discovery.getProviders()) {
      const instance = wrapper.instance as Record<string, unknown> | undefined;
      // A request-scoped or transient provider has no instance the worker could call.
      if (!instance || typeof instance !== 'object' || !wrapper.isDependencyTreeStatic()) continue;
      for (const method of this.scanner.getAllMethodNames(
        Object.getPrototypeOf(instance) as object | null,
      )) {
        const step = Reflect.getMetadata(ErasesEndUsers.KEY, instance[method] as object) as
          ErasureStep | undefined;
        if (!step) continue;
        found.push({
          ...step,
          name: `${instance.constructor.name}.${method}`,
          erase: (instance[method] as EraseEndUsers).bind(instance),
        });
      }
    }
    const names = new Set<string>();
    for (const { name } of found) {
      // One provider registered in two modules would erase twice.
      if (names.has(name)) throw new Error(`two erasure participants are named ${name}`);
      names.add(name);
    }
    this.participants = found.sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
  }

  get inOrder(): readonly ErasureParticipant[] {
    return this.participants;
  }
}
