import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import type { EntityManager } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { type Page, toPage } from '../common/pagination/pagination';
import { Clock } from '../common/time/clock';
import { memoryConfig } from '../config/memory.config';
import { Database } from '../database/database';
import { type FactDto, factKey, normalizeFact, toFactResponse } from './dto/fact.dto';
import { EndUsersService } from '../end-users/end-users.service';
import { IdempotencyService } from '../idempotency/idempotency.service';
import { FactsRepository } from './facts.repository';

/**
 * Durable facts about an end user, shared by every personality of the organization
 * (docs/memory.md): written here by the business, learned by the engines in the reply's own
 * statement. Writers of one end user's facts take that user's fact lock, so the limit holds
 * under any concurrency.
 */
@Injectable()
export class FactsService {
  private readonly limit: number;

  constructor(
    @Inject(memoryConfig.KEY) memory: ConfigType<typeof memoryConfig>,
    private readonly database: Database,
    private readonly facts: FactsRepository,
    private readonly endUsersService: EndUsersService,
    private readonly clock: Clock,
    private readonly idempotency: IdempotencyService,
  ) {
    this.limit = memory.factsLimit;
  }

  async list(
    organizationId: string,
    userId: string,
    options: { limit: number; startingAfter?: string },
  ): Promise<Page<FactDto>> {
    const endUser = await this.endUsersService.findRow(organizationId, userId);
    const rows = await this.facts.findPage(endUser.id, options.limit, options.startingAfter);
    return toPage(rows, options.limit, toFactResponse);
  }

  /**
   * A new fact (created: true), or the one the end user already holds with the same content,
   * case and white space aside (created: false). 409 `facts_limit_reached` at the limit.
   */
  async create(
    organizationId: string,
    userId: string,
    content: string,
  ): Promise<{ created: boolean; fact: FactDto }> {
    const endUser = await this.endUsersService.findRow(organizationId, userId);
    const stored = normalizeFact(content);
    const key = factKey(stored);
    return this.database.transaction(async (manager) => {
      const locked = await this.facts.lockForFacts(manager, endUser.id);
      if (locked.status !== 'active') throw this.endUsersService.underDeletion(locked);
      const existing = await this.facts.findByKey(manager, endUser.id, key);
      if (existing) return { created: false, fact: toFactResponse(existing) };
      if (locked.facts >= this.limit) {
        throw new AppError(
          'facts_limit_reached',
          `The end user already holds ${this.limit} facts (MEMORY_FACTS_LIMIT); delete one first`,
        );
      }
      const row = await this.facts.insert(manager, {
        organizationId,
        endUserId: endUser.id,
        content: stored,
        contentKey: key,
        source: 'api',
        at: this.clock.now(),
      });
      return { created: true, fact: toFactResponse(row) };
    });
  }

  /** 404 for another end user's fact; 409 `conflict` when the end user holds the new content. */
  async update(
    organizationId: string,
    userId: string,
    id: string,
    content: string,
  ): Promise<FactDto> {
    const endUser = await this.endUsersService.findRow(organizationId, userId);
    const stored = normalizeFact(content);
    const key = factKey(stored);
    const fact = await this.database.transaction(async (manager) => {
      const locked = await this.facts.lockForFacts(manager, endUser.id);
      if (locked.status !== 'active') throw this.endUsersService.underDeletion(locked);
      const same = await this.facts.findByKey(manager, endUser.id, key);
      if (same && same.id !== id) {
        throw new AppError('conflict', `The end user already holds this fact (${same.id})`);
      }
      const row = await this.facts.update(manager, { id: endUser.id, organizationId, userId }, id, {
        content: stored,
        contentKey: key,
        at: this.clock.now(),
      });
      if (!row) throw AppError.notFound('Fact');
      return toFactResponse(row);
    });
    await this.idempotency.forgetAfterDeletion(organizationId, [userId]);
    return fact;
  }

  /**
   * In the transaction that stores a reply's learned facts: takes the end user's fact lock and
   * answers how many more facts they may hold.
   */
  async roomFor(manager: EntityManager, endUserId: string): Promise<number> {
    const locked = await this.facts.lockForFacts(manager, endUserId);
    return Math.max(0, this.limit - locked.facts);
  }

  async delete(organizationId: string, userId: string, id: string): Promise<void> {
    const endUser = await this.endUsersService.findRow(organizationId, userId);
    if (!(await this.facts.delete({ id: endUser.id, organizationId, userId }, id))) {
      throw AppError.notFound('Fact');
    }
    await this.idempotency.forgetAfterDeletion(organizationId, [userId]);
  }
}
