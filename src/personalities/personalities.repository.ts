import { Injectable } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { DataSource, type EntityManager, MoreThan, Repository } from 'typeorm';
import { CatalogPersonality } from './entities/catalog-personality.entity';
import type { CatalogEntryFile } from './entities/personality-definition';
import { Personality } from './entities/personality.entity';
import { WebhookEventsService } from '../webhooks/webhook-events.service';

/** What /v1/respond and its engines need of a personality to write replies. */
export type PersonalityForReply = Pick<
  Personality,
  'id' | 'name' | 'description' | 'traits' | 'voice' | 'systemPrompt' | 'model' | 'replies'
>;

const UPSERT_CATALOG_ENTRY = `
  INSERT INTO catalog_personalities
    (slug, name, description, version, traits, voice, system_prompt, replies)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (slug) DO UPDATE SET
    name = excluded.name, description = excluded.description, version = excluded.version,
    traits = excluded.traits, voice = excluded.voice, system_prompt = excluded.system_prompt,
    replies = excluded.replies, updated_at = now()`;

// Every field of the entry, copied by value in one statement: later imports cannot reach a clone.
/** The clone and its `personality.created` webhook event (`event`, a WebhookEventsService step). */
function cloneCatalogEntry(event: { sql: string }): string {
  return `
  WITH cloned AS (
    INSERT INTO personalities (organization_id, source_slug, source_version, name, description,
                               traits, voice, system_prompt, replies)
    SELECT $1, slug, version, name, description, traits, voice, system_prompt, replies
      FROM catalog_personalities WHERE slug = $2
    RETURNING id, jsonb_build_object('id', id, 'name', name, 'source_slug', source_slug,
                                     'created_at', created_at) AS webhook_data),
  ${event.sql}
  SELECT id FROM cloned`;
}

const FIND_FOR_REPLY = `
  SELECT id, name, description, traits, voice, system_prompt AS "systemPrompt", model, replies
    FROM personalities WHERE id = $1 AND organization_id = $2`;

// Through a CTE, so the driver answers rows rather than DELETE's [rows, count].
const DELETE_PERSONALITY = `
  WITH deleted AS (
    DELETE FROM personalities WHERE id = $1 AND organization_id = $2
    RETURNING name, source_slug)
  SELECT * FROM deleted`;

/**
 * Every query of the catalog (`catalog_personalities`) and of the organizations' personalities
 * (`personalities`), both through TypeORM: the deletion runs in a caller's transaction with the
 * audit event, so the personalities table is not also reached through the raw pool.
 */
@Injectable()
export class PersonalitiesRepository {
  constructor(
    @InjectDataSource() private readonly dataSource: DataSource,
    @InjectRepository(CatalogPersonality)
    private readonly catalog: Repository<CatalogPersonality>,
    @InjectRepository(Personality) private readonly personalities: Repository<Personality>,
    private readonly webhookEvents: WebhookEventsService,
  ) {}

  async findCatalogVersions(): Promise<Map<string, string>> {
    const rows = await this.catalog.find({ select: { slug: true, version: true } });
    return new Map(rows.map((row) => [row.slug, row.version]));
  }

  /** Upserts entries by slug, all or none. */
  async upsertCatalogEntries(entries: CatalogEntryFile[]): Promise<void> {
    await this.dataSource.transaction(async (manager) => {
      for (const entry of entries) {
        await manager.query(UPSERT_CATALOG_ENTRY, [
          entry.slug,
          entry.name,
          entry.description,
          entry.version,
          JSON.stringify(entry.traits),
          JSON.stringify(entry.voice),
          entry.system_prompt,
          JSON.stringify(entry.replies),
        ]);
      }
    });
  }

  /** Ordered by slug; `take` rows after `startingAfter` (a slug) when given. */
  findCatalogPage(take: number, startingAfter?: string): Promise<CatalogPersonality[]> {
    return this.catalog.find({
      where: startingAfter ? { slug: MoreThan(startingAfter) } : {},
      order: { slug: 'ASC' },
      take,
    });
  }

  /**
   * The new personality's id, or null when no catalog entry has this slug. One statement: the
   * clone and its webhook event commit together.
   */
  async insertCloneOfCatalogEntry(organizationId: string, slug: string): Promise<string | null> {
    const event = this.webhookEvents.step('cloned', 3, {
      organizationId,
      type: 'personality.created',
    });
    const rows: Array<{ id: string }> = await this.personalities.query(cloneCatalogEntry(event), [
      organizationId,
      slug,
      ...event.params,
    ]);
    return rows[0]?.id ?? null;
  }

  existsInOrganization(organizationId: string, id: string): Promise<boolean> {
    return this.personalities.existsBy({ id, organizationId });
  }

  /**
   * Oldest first, `take` rows after the personality `afterId` when given. The cursor is compared
   * in SQL: created_at has microseconds, which a JS Date would round away.
   */
  findPageForOrganization(
    organizationId: string,
    take: number,
    afterId?: string,
  ): Promise<Personality[]> {
    const query = this.personalities
      .createQueryBuilder('p')
      .where('p.organization_id = :organizationId', { organizationId })
      .orderBy('p.created_at', 'ASC')
      .addOrderBy('p.id', 'ASC')
      .take(take);
    if (afterId) {
      query.andWhere(
        '(p.created_at, p.id) > (SELECT c.created_at, c.id FROM personalities c WHERE c.id = :cursor)',
        { cursor: afterId },
      );
    }
    return query.getMany();
  }

  findInOrganization(organizationId: string, id: string): Promise<Personality | null> {
    return this.personalities.findOneBy({ id, organizationId });
  }

  save(personality: Personality): Promise<Personality> {
    return this.personalities.save(personality);
  }

  /**
   * Only the columns an engine reads, as SQL text: on /v1/respond's path, where building and
   * hydrating a find() cost about twice the CPU of the query itself.
   */
  async findForReply(organizationId: string, id: string): Promise<PersonalityForReply | null> {
    const rows: PersonalityForReply[] = await this.personalities.query(FIND_FOR_REPLY, [
      id,
      organizationId,
    ]);
    return rows[0] ?? null;
  }

  /** What the audit event names of the deleted personality, or null when there was none. */
  async deleteInOrganization(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<{ name: string; sourceSlug: string | null } | null> {
    const rows: Array<{ name: string; source_slug: string | null }> = await manager.query(
      DELETE_PERSONALITY,
      [id, organizationId],
    );
    const row = rows[0];
    return row ? { name: row.name, sourceSlug: row.source_slug } : null;
  }
}
