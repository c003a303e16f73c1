import { DiscoveryService } from '@nestjs/core';
import type { EntityManager } from 'typeorm';

/** An end user being erased: the internal id, and the organization's `user_id` for them. */
export interface ErasedEndUser {
  id: string;
  organizationId: string;
  userId: string;
}

/**
 * When a participant runs in the erasure's transaction, lowest first (ties by name). Named steps
 * with gaps, so a new participant finds its place without renumbering the others.
 */
export const ErasureOrder = {
  /** Rows that point at other rows of the end user (a fact names the memory it came from). */
  REFERRERS: 100,
  /** The end user's own rows. */
  DATA: 200,
  /** Rows that are kept, with the end user's name taken out. */
  REDACTIONS: 300,
  /** The end_users row itself; foreign keys that cascade from it go with it. */
  END_USERS: 900,
  /** Telling the customer, once nothing of the end user is left. */
  NOTICES: 1000,
} as const;

/** Where a module's erasure method runs, and what it covers. */
export interface ErasureStep {
  /** One of ErasureOrder (or a number between two of them). */
  readonly order: number;
  /** Tables whose end-user rows the method deletes, or whose end-user data it redacts. */
  readonly tables: readonly string[];
  /**
   * Tables of the module whose rows go with the end_users row: a foreign key to it with
   * ON DELETE CASCADE, which the coverage spec checks.
   */
  readonly cascades?: readonly string[];
}

/** What a module's erasure method does: runs in the erasure's transaction (no statement timeout). */
export type EraseEndUsers = (
  manager: EntityManager,
  endUsers: readonly ErasedEndUser[],
) => Promise<void>;

/**
 * What one module erases of its own data when end users are erased (docs/data-plane.md): a
 * method marked @ErasesEndUsers(), named `Class.method`. The ErasureWorker runs every participant
 * in one transaction, and throwing rolls all of it back; test/erasure-coverage.e2e-spec.ts fails
 * when a table holding an end user's id is claimed by none.
 */
export interface ErasureParticipant extends ErasureStep {
  readonly name: string;
  readonly erase: EraseEndUsers;
}

const Discoverable = DiscoveryService.createDecorator<ErasureStep>();

/**
 * Marks a method of a provider as its module's part of erasure; ErasureParticipants finds it in
 * whichever module provides it, so erasure needs no list of modules.
 */
export function ErasesEndUsers(
  step: ErasureStep,
): <T extends EraseEndUsers>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => void {
  return (target, key, descriptor) => Discoverable(step)(target, key, descriptor);
}
ErasesEndUsers.KEY = Discoverable.KEY;

/**
 * Deletes at most `rows` rows of these end users' data, in a transaction of its own ahead of the
 * erasure's; answers how many it deleted (fewer than `rows`: none of theirs is left).
 */
export type EraseEndUsersPart = (
  manager: EntityManager,
  endUsers: readonly ErasedEndUser[],
  rows: number,
) => Promise<number>;

/** What a module's erasure in parts covers. */
export interface ErasureInPartsStep {
  /** Tables whose end-user rows the method deletes (its @ErasesEndUsers method covers them too). */
  readonly tables: readonly string[];
}

/**
 * Data an end user can hold without bound (memories), erased a bounded number of rows a
 * transaction before the erasure's own transaction runs (docs/data-plane.md): a method marked
 * @ErasesEndUsersInParts(), named `Class.method`. Its module's @ErasesEndUsers method still erases
 * whatever is left, so stopping half way loses nothing.
 */
export interface ErasureInParts extends ErasureInPartsStep {
  readonly name: string;
  readonly erase: EraseEndUsersPart;
}

const DiscoverablePart = DiscoveryService.createDecorator<ErasureInPartsStep>();

/** Marks a method of a provider as its module's erasure in parts (see ErasureInParts). */
export function ErasesEndUsersInParts(
  step: ErasureInPartsStep,
): <T extends EraseEndUsersPart>(
  target: object,
  key: string | symbol,
  descriptor: TypedPropertyDescriptor<T>,
) => void {
  return (target, key, descriptor) => DiscoverablePart(step)(target, key, descriptor);
}
ErasesEndUsersInParts.KEY = DiscoverablePart.KEY;
