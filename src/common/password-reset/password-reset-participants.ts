import { Injectable, type OnModuleInit } from '@nestjs/common';
import { DiscoveryService, MetadataScanner } from '@nestjs/core';
import type { EntityManager } from 'typeorm';
import { markedMethods } from '../discovery/marked-methods';
import {
  type AfterReset,
  type PasswordReset,
  type TakeAccountBack,
  TakesAccountBack,
} from './password-reset-participant';

/** Every provider method marked @TakesAccountBack(), run by name order. */
@Injectable()
export class PasswordResetParticipants implements OnModuleInit {
  private participants: ReadonlyArray<{ name: string; takeBack: TakeAccountBack }> = [];

  constructor(
    private readonly discovery: DiscoveryService,
    private readonly scanner: MetadataScanner,
  ) {}

  /** After every provider is built, so participants of modules built later are found too. */
  onModuleInit(): void {
    this.participants = markedMethods<true, TakeAccountBack>(
      this.discovery,
      this.scanner,
      TakesAccountBack.KEY,
    )
      .map(({ name, method }) => ({ name, takeBack: method }))
      .sort((a, b) => a.name.localeCompare(b.name));
  }

  get names(): readonly string[] {
    return this.participants.map(({ name }) => name);
  }

  /** Each participant in the reset's transaction; answers what they left for after the commit. */
  async takeBack(manager: EntityManager, reset: PasswordReset): Promise<AfterReset[]> {
    const after: AfterReset[] = [];
    for (const { takeBack } of this.participants) {
      const then = await takeBack(manager, reset);
      if (then) after.push(then);
    }
    return after;
  }
}
