import { Injectable } from '@nestjs/common';
import { EntityManager } from 'typeorm';
import { Caches } from '../common/cache/caches';
import { Clock } from '../common/time/clock';
import type { SharedCache } from '../common/cache/shared-cache';
import { User } from './entities/user.entity';
import { type PasswordReplaced, UsersRepository } from './users.repository';

/**
 * How long another instance may keep accepting a token after a password reset elsewhere, when
 * Redis is not there to tell it at once.
 */
export const TOKEN_VERSION_CACHE_MS = 5_000;

@Injectable()
export class UsersService {
  /**
   * Each user's token version, dropped on every instance when a reset raises it. A read that
   * started before the reset is not kept (SharedCache): it may hold the old version, which would
   * let the tokens the reset ended in again until the entry expires.
   */
  private readonly tokenVersions: SharedCache<number | null>;
  /**
   * Whether an SSO identity is still linked to a user, by `user:identity` (an identity unlinked
   * may be linked to another user next): dropped when unlinked.
   */
  private readonly linkedIdentities: SharedCache<boolean>;
  /** Whether an access token (by its SHA-256, hex) was signed out of: dropped when it is. */
  private readonly signedOutTokens: SharedCache<boolean>;

  constructor(
    private readonly users: UsersRepository,
    private readonly clock: Clock,
    caches: Caches,
  ) {
    this.tokenVersions = caches.shared({
      channel: 'identity:user-tokens-ended',
      ttlMs: TOKEN_VERSION_CACHE_MS,
    });
    this.linkedIdentities = caches.shared({
      channel: 'identity:sso-unlinked',
      ttlMs: TOKEN_VERSION_CACHE_MS,
    });
    this.signedOutTokens = caches.shared({
      channel: 'identity:signed-out',
      ttlMs: TOKEN_VERSION_CACHE_MS,
    });
  }

  findById(id: string): Promise<User | null> {
    return this.users.findById(id);
  }

  findByEmail(email: string): Promise<User | null> {
    return this.users.findByEmail(email);
  }

  /** Inserts the user unless the address is taken (any case); null when it is. */
  createIfEmailFree(
    manager: EntityManager,
    fields: { email: string; name?: string | null; passwordHash: string },
  ): Promise<User | null> {
    return this.users.insertIfEmailFree(manager, { ...fields, name: fields.name ?? null });
  }

  /** The current token version (cached briefly); null when the user no longer exists. */
  tokenVersion(userId: string): Promise<number | null> {
    return this.tokenVersions.get(userId, () => this.users.tokenVersion(userId));
  }

  /**
   * Whether the SSO identity that issued a token (AccessTokenPayload.idp) is still the user's
   * (cached briefly, as the token version).
   */
  identityLinked(userId: string, identityId: string): Promise<boolean> {
    return this.linkedIdentities.get(`${userId}:${identityId}`, () =>
      this.users.identityLinked(userId, identityId),
    );
  }

  /** Whether the access token whose SHA-256 is `tokenHash` was signed out of (cached briefly). */
  signedOut(tokenHash: Buffer): Promise<boolean> {
    return this.signedOutTokens.get(tokenHash.toString('hex'), () =>
      this.users.signedOut(tokenHash),
    );
  }

  /**
   * Ends one access token (POST /v1/auth/logout): refused from the next request on, here at once
   * and, when Redis is set, on every instance before this resolves; the user's other tokens go on.
   */
  async signOut(userId: string, tokenHash: Buffer, expiresAt: Date): Promise<void> {
    await this.users.signOut(userId, tokenHash, expiresAt, this.clock.now());
    await this.signedOutTokens.invalidate(tokenHash.toString('hex'), { confirmed: true });
  }

  /** After an unlink: at once here, and, when Redis is set, on every instance before this resolves. */
  forgetIdentity(userId: string, identityId: string): Promise<void> {
    return this.linkedIdentities.invalidate(`${userId}:${identityId}`, { confirmed: true });
  }

  /**
   * For a write a user's check refused in its statement: whether their access token has ended
   * since it was let in (a password reset committed meanwhile; 401, not a role's 403), by the
   * version as committed now, past the cache.
   */
  async tokenEnded(caller: { userId: string; tokenVersion?: number }): Promise<boolean> {
    if (caller.tokenVersion === undefined) return false;
    return (await this.users.tokenVersion(caller.userId)) !== caller.tokenVersion;
  }

  /**
   * Sets a new password hash and raises the token version, which ends every access token issued
   * so far, and marks the address verified (the reset link was read in its mailbox). Inside the
   * caller's transaction, at `at`, the user's row locked until it ends. Answers the user's e-mail
   * and whether it was verified before, or null when gone.
   */
  replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
    at: Date,
  ): Promise<PasswordReplaced | null> {
    return this.users.replacePassword(manager, userId, passwordHash, at);
  }

  /**
   * After the version was raised: at once here, and, when Redis is set, on every instance before
   * this resolves (the reset's answer waits, as a key's revocation does).
   */
  forgetTokenVersion(userId: string): Promise<void> {
    return this.tokenVersions.invalidate(userId, { confirmed: true });
  }

  /** In the caller's transaction: the user's address is verified from `at` on. */
  markEmailVerified(manager: EntityManager, userId: string, at: Date): Promise<void> {
    return this.users.markEmailVerified(manager, userId, at);
  }

  /**
   * In the transaction that creates an organization: counts it against the user's `cap`;
   * false when they have created `cap` organizations already.
   */
  countOrganizationCreated(manager: EntityManager, userId: string, cap: number): Promise<boolean> {
    return this.users.countOrganizationCreated(manager, userId, cap);
  }
}
