import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { PinoLogger } from 'nestjs-pino';
import { EntityManager } from 'typeorm';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { Caches } from '../common/cache/caches';
import type { TtlCache } from '../common/cache/ttl-cache';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { User } from './entities/user.entity';
import { UsersRepository } from './users.repository';

/**
 * How long another instance may keep accepting a token after a password reset elsewhere, when
 * Redis is not there to tell it at once.
 */
export const TOKEN_VERSION_CACHE_MS = 5_000;

@Injectable()
export class UsersService implements OnModuleInit, OnModuleDestroy {
  private readonly tokenVersions: TtlCache<number | null>;
  private readonly endedTokens: InvalidationChannel;

  constructor(
    private readonly users: UsersRepository,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    logger: PinoLogger,
    caches: Caches,
  ) {
    logger.setContext(UsersService.name);
    this.tokenVersions = caches.local(TOKEN_VERSION_CACHE_MS);
    this.endedTokens = new InvalidationChannel(redis, 'identity:user-tokens-ended', logger);
  }

  onModuleInit(): void {
    this.endedTokens.listen((userId) => this.tokenVersions.delete(userId));
  }

  onModuleDestroy(): void {
    this.endedTokens.close();
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
  async tokenVersion(userId: string): Promise<number | null> {
    const cached = this.tokenVersions.get(userId);
    if (cached !== undefined) return cached;
    const version = await this.users.tokenVersion(userId);
    this.tokenVersions.set(userId, version);
    return version;
  }

  /**
   * Sets a new password hash and raises the token version, which ends every access token issued
   * so far; inside the caller's transaction, at `at`. Answers the user's e-mail, or null when
   * gone.
   */
  replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
    at: Date,
  ): Promise<string | null> {
    return this.users.replacePassword(manager, userId, passwordHash, at);
  }

  /** After the version was raised: at once here, and on every instance when Redis is set. */
  forgetTokenVersion(userId: string): Promise<void> {
    this.tokenVersions.delete(userId);
    return this.endedTokens.publish(userId);
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
