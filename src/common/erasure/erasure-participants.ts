import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import { markedMethods } from '../discovery/marked-methods';
import {
  type EraseEndUsers,
  type EraseEndUsersPart,
  type ErasureInParts,
  type ErasureInPartsStep,
  type ErasureParticipant,
  type ErasureStep,
  ErasesEndUsers,
  ErasesEndUsersInParts,
} from './erasure-participant';

/**
 * Every provider method marked @ErasesEndUsers(), in the order they run, and every one marked
 * @ErasesEndUsersInParts(), by name.
 */
@Injectable()
export class ErasureParticipants implements OnModuleInit {
  private participants: readonly ErasureParticipant[] = [];
  private parts: readonly ErasureInParts[] = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  /** After every provider is built, so participants of modules built later are found too. */
  onModuleInit(): void {
    this.participants = markedMethods<ErasureStep, EraseEndUsers>(
      this.discovery,
      this.scanner,
      ErasesEndUsers.KEY,
    )
      .map(({ name, meta, method }) => ({ ...meta, name, erase: method }))
      .sort((a, b) => a.order - b.order || a.name.localeCompare(b.name));
    this.parts = markedMethods<ErasureInPartsStep, EraseEndUsersPart>(
      this.discovery,
      this.scanner,
      ErasesEndUsersInParts.KEY,
    )
      .map(({ name, meta, method }) => ({ ...meta, name, erase: method }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  get inOrder(): readonly ErasureParticipant[] {
    return this.participants;
  }

  get inParts(): readonly ErasureInParts[] {
    return this.parts;
  }
}
