import { Inject, Injectable, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { InjectRepository } from '@nestjs/typeorm';
import { EntityManager, Repository } from 'typeorm';
import type { Logger } from 'pino';
import { InvalidationChannel } from '../common/cache/invalidation-channel';
import { TtlCache } from '../common/cache/ttl-cache';
import { ROOT_LOGGER } from '../common/logging/root-logger';
import { REDIS_CLIENT, type RedisClient } from '../redis/redis.module';
import { User } from './entities/user.entity';

/**
 * How long another instance may keep accepting a token after a password reset elsewhere, when
 * Redis is not there to tell it at once.
 */
export const TOKEN_VERSION_CACHE_MS = 5_000;

@Injectable()
export class UsersService implements OnModuleInit, OnModuleDestroy {
  private readonly tokenVersions = new TtlCache<number | null>(TOKEN_VERSION_CACHE_MS);
  private readonly endedTokens: InvalidationChannel;

  constructor(
    @InjectRepository(User) private readonly users: Repository<User>,
    @Inject(REDIS_CLIENT) redis: RedisClient,
    @Inject(ROOT_LOGGER) logger: Logger,
  ) {
    this.endedTokens = new InvalidationChannel(redis, 'identity:user-tokens-ended', logger);
  }

  onModuleInit(): void {
    this.endedTokens.listen((userId) => this.tokenVersions.delete(userId));
  }

  onModuleDestroy(): void {
    this.endedTokens.close();
  }

  findById(id: string): Promise<User | null> {
    return this.users.findOneBy({ id });
  }

  findByEmail(email: string): Promise<User | null> {
    return this.users
      .createQueryBuilder('user')
      .where('lower(user.email) = lower(:email)', { email })
      .getOne();
  }

  /** Inserts the user unless the address is taken (any case); null when it is. */
  async createIfEmailFree(
    manager: EntityManager,
    fields: { email: string; name?: string | null; passwordHash: string },
  ): Promise<User | null> {
    const rows: User[] = await manager.query(
      `INSERT INTO users (email, name, password_hash) VALUES ($1, $2, $3)
       ON CONFLICT (lower(email)) DO NOTHING
       RETURNING id, email, name, token_version AS "tokenVersion", created_at AS "createdAt", updated_at AS "updatedAt"`,
      [fields.email, fields.name ?? null, fields.passwordHash],
    );
    return rows[0] ?? null;
  }

  /** The current token version (cached briefly); null when the user no longer exists. */
  async tokenVersion(userId: string): Promise<number | null> {
    const cached = this.tokenVersions.get(userId);
    if (cached !== undefined) return cached;
    const rows: Array<{ token_version: number }> = await this.users.query(
      'SELECT token_version FROM users WHERE id = $1',
      [userId],
    );
    const version = rows[0]?.token_version ?? null;
    this.tokenVersions.set(userId, version);
    return version;
  }

  /**
   * Sets a new password hash and raises the token version, which ends every access token issued
   * so far; inside the caller's transaction. Answers the user's e-mail, or null when gone.
   */
  async replacePassword(
    manager: EntityManager,
    userId: string,
    passwordHash: string,
  ): Promise<string | null> {
    const rows: Array<{ email: string }> = await manager.query(
      `WITH changed AS (
         UPDATE users SET password_hash = $2, token_version = token_version + 1, updated_at = now()
          WHERE id = $1 RETURNING email)
       SELECT email FROM changed`,
      [userId, passwordHash],
    );
    return rows[0]?.email ?? null;
  }

  /** After the version was raised: at once here, and on every instance when Redis is set. */
  forgetTokenVersion(userId: string): Promise<void> {
    this.tokenVersions.delete(userId);
    return this.endedTokens.publish(userId);
  }
}
