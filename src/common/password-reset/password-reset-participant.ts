import { DiscoveryService } from '@nestjs/core';
import type { EntityManager } from 'typeorm';

/** A password reset being committed: whose, and whether their address was verified before it. */
export interface PasswordReset {
  userId: string;
  /**
   * False: the address was never verified until this reset. Whoever registered it first (not
   * necessarily its mailbox's owner, who reset the password) held the account until now.
   */
  wasVerified: boolean;
}

/** Work to do once the reset's transaction has committed (telling other instances, …). */
export type AfterReset = () => Promise<void>;

/**
 * What a module does of its own data when a password reset takes an account back: runs in the
 * reset's transaction, after the user's row is locked and the token version raised; throwing
 * rolls the reset back. May answer work for after the commit.
 */
export type TakeAccountBack = (
  manager: EntityManager,
  reset: PasswordReset,
) => Promise<AfterReset | undefined>;

const Discoverable = DiscoveryService.createDecorator<true>();

/**
 * Marks a method of a provider as its module's part of a password reset (a TakeAccountBack):
 * PasswordResetParticipants finds it in whichever module provides it, so the reset (in auth)
 * needs no import of the modules taking part, some of which import auth.
 */
export function TakesAccountBack(): <T extends TakeAccountBack>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => void {
  return (target, key, descriptor) => Discoverable(true)(target, key, descriptor);
}
TakesAccountBack.KEY = Discoverable.KEY;
