import { Injectable } from '@nestjs/common';
import { type EntityManager, MoreThan } from 'typeorm';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { type Keyset, keysetAfter, keysetOrder } from '../database/keyset';
import { cte, join, sql, withEntries } from '../database/sql';
import type { WebhookEndpoint } from '../webhooks/entities/webhook-endpoint.entity';
import { webhookEventStep } from '../webhooks/webhook-event.step';
import { CatalogPersonality } from './entities/catalog-personality.entity';
import type { ToolDefinition } from '../tools/tool-definitions';
import type { CatalogEntryFile, PersonalityReplies } from './entities/personality-definition';
import { Personality } from './entities/personality.entity';
import { isoTime } from '../database/iso-time';

/** What /v1/respond and its engines need of a personality to write replies. */
const FOR_REPLY = Columns.propertiesOf<Personality>()(
  'id',
  'name',
  'description',
  'traits',
  'voice',
  'systemPrompt',
  'model',
  'replies',
  'language',
  'searchConfig',
  'tools',
);

export type PersonalityForReply = RowOf<typeof FOR_REPLY>;

/** A personality written from an imported document's fields, under an id chosen beforehand. */
export interface NewPersonality {
  id: string;
  sourceSlug: string;
  sourceVersion: string;
  name: string;
  description: string;
  traits: string[];
  voice: object;
  systemPrompt: string;
  replies: PersonalityReplies;
  language: string;
  searchConfig: string;
}

/** A personality's columns under its entity's property names. */
const PERSONALITY_COLUMNS = Columns.propertiesOf<Personality>('p')(
  'id',
  'organizationId',
  'sourceSlug',
  'sourceVersion',
  'name',
  'description',
  'traits',
  'voice',
  'systemPrompt',
  'replies',
  'language',
  'searchConfig',
  'model',
  'tools',
  'createdAt',
  'updatedAt',
);

const PERSONALITY_ID = Columns.rowOf<Personality>()('id');

const CATALOG_REPLIES = Columns.rowOf<CatalogPersonality>()('slug', 'replies');

const ENDPOINT_ID = Columns.rowOf<WebhookEndpoint>()('id');

/** What the audit event names of a deleted personality. */
const DELETED_PERSONALITY = Columns.rowOf<Personality>()('name', 'sourceSlug');

/**
 * Every query of the catalog (`catalog_personalities`) and of the organizations' personalities
 * (`personalities`): TypeORM's repository for the plain reads and saves, SQL for the clone (one
 * statement with its webhook event), the reply's hot read and the audited delete.
 */
@Injectable()
export class PersonalitiesRepository {
  private readonly catalog;
  private readonly personalities;

  constructor(private readonly database: Database) {
    this.catalog = database.repository(CatalogPersonality);
    this.personalities = database.repository(Personality);
  }

  async findCatalogVersions(): Promise<Map<string, string>> {
    const rows = await this.catalog.find({ select: { slug: true, version: true } });
    return new Map(rows.map((row) => [row.slug, row.version]));
  }

  /** Upserts entries by slug, all or none. */
  async upsertCatalogEntries(entries: CatalogEntryFile[], at: Date): Promise<void> {
    await this.database.transaction(async (manager) => {
      for (const entry of entries) {
        await this.database.count(
          sql`INSERT INTO catalog_personalities
                (slug, name, description, version, traits, voice, system_prompt, replies)
              VALUES (${entry.slug}, ${entry.name}, ${entry.description}, ${entry.version},
                      ${JSON.stringify(entry.traits)}, ${JSON.stringify(entry.voice)},
                      ${entry.system_prompt}, ${JSON.stringify(entry.replies)})
              ON CONFLICT (slug) DO UPDATE SET
                name = excluded.name, description = excluded.description,
                version = excluded.version, traits = excluded.traits, voice = excluded.voice,
                system_prompt = excluded.system_prompt, replies = excluded.replies,
                updated_at = ${at}`,
          { manager },
        );
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
  async insertCloneOfCatalogEntry(
    organizationId: string,
    slug: string,
    fields: { language: string; searchConfig: string; tools: ToolDefinition[] },
    at: Date,
  ): Promise<string | null> {
    // Every field of the entry, copied by value in one statement: later imports cannot reach it.
    const cloned = cte(
      'cloned',
      {
        webhook_data: sql`jsonb_build_object('id', id, 'name', name, 'source_slug', source_slug,
                                             'created_at', ${isoTime('created_at')})`,
      },
      (lent) => sql`
        INSERT INTO personalities (organization_id, source_slug, source_version, name,
                                   description, traits, voice, system_prompt, replies, language,
                                   search_config, tools)
        SELECT ${organizationId}, slug, version, name, description, traits, voice, system_prompt,
               replies, ${fields.language}, ${fields.searchConfig},
               ${JSON.stringify(fields.tools)}::jsonb
          FROM catalog_personalities WHERE slug = ${slug}
        RETURNING id, ${lent}`,
    );
    const entries = [
      cloned,
      webhookEventStep(cloned, { organizationId, type: 'personality.created', at }),
    ];
    const row = await this.database.row(
      withEntries(entries, PERSONALITY_ID.query`SELECT ${PERSONALITY_ID} FROM ${cloned.ref}`),
    );
    return row?.id ?? null;
  }

  /**
   * Which of `ids` are the organization's personalities, locked FOR KEY SHARE for the caller's
   * transaction: a concurrent DELETE waits for it, so the rows written against them keep their
   * foreign keys.
   */
  async lockInOrganization(
    manager: EntityManager,
    organizationId: string,
    ids: string[],
  ): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.database.rows(
      PERSONALITY_ID.query`SELECT ${PERSONALITY_ID} FROM personalities
           WHERE organization_id = ${organizationId} AND id = ANY(${ids}::uuid[])
           FOR KEY SHARE`,
      { manager },
    );
    return new Set(rows.map((row) => row.id));
  }

  /** The replies of the catalog entries with these slugs, by slug. */
  async findCatalogReplies(
    manager: EntityManager,
    slugs: string[],
  ): Promise<Map<string, PersonalityReplies>> {
    if (slugs.length === 0) return new Map();
    const rows = await this.database.rows(
      CATALOG_REPLIES.query`SELECT ${CATALOG_REPLIES} FROM catalog_personalities
                             WHERE slug = ANY(${slugs}::text[])`,
      { manager },
    );
    return new Map(rows.map((row) => [row.slug, row.replies]));
  }

  /** In the caller's transaction: the personalities and their `personality.created` events. */
  async insertMany(
    manager: EntityManager,
    organizationId: string,
    personalities: NewPersonality[],
    at: Date,
  ): Promise<void> {
    const rows = personalities.map(
      (p) =>
        sql`(${p.id}::uuid, ${p.sourceSlug}, ${p.sourceVersion}, ${p.name}, ${p.description},
             ${JSON.stringify(p.traits)}::jsonb, ${JSON.stringify(p.voice)}::jsonb,
             ${p.systemPrompt}, ${JSON.stringify(p.replies)}::jsonb, ${p.language},
             ${p.searchConfig})`,
    );
    const inserted = cte(
      'imported_personalities',
      {
        webhook_data: sql`jsonb_build_object('id', id, 'name', name, 'source_slug', source_slug,
                                             'created_at', ${isoTime('created_at')})`,
      },
      (lent) => sql`
        INSERT INTO personalities (id, organization_id, source_slug, source_version, name,
                                   description, traits, voice, system_prompt, replies, language,
                                   search_config)
        SELECT v.id, ${organizationId}::uuid, v.source_slug, v.source_version, v.name,
               v.description, v.traits, v.voice, v.system_prompt, v.replies, v.language,
               v.search_config
          FROM (VALUES ${join(rows)})
               AS v(id, source_slug, source_version, name, description, traits, voice,
                    system_prompt, replies, language, search_config)
        RETURNING id, ${lent}`,
    );
    await this.database.count(
      withEntries(
        [inserted, webhookEventStep(inserted, { organizationId, type: 'personality.created', at })],
        sql`SELECT count(*) FROM ${inserted.ref}`,
      ),
      { manager },
    );
  }

  existsInOrganization(organizationId: string, id: string): Promise<boolean> {
    return this.personalities.existsBy({ id, organizationId });
  }

  /** Oldest first, `take` rows after the organization's personality `afterId` when given. */
  findPageForOrganization(
    organizationId: string,
    take: number,
    afterId?: string,
  ): Promise<Personality[]> {
    const keyset: Keyset = {
      table: 'personalities',
      alias: 'p',
      cursor: afterId,
      scope: { organization_id: organizationId },
      order: 'asc',
    };
    return this.database.rows(
      PERSONALITY_COLUMNS.query`SELECT ${PERSONALITY_COLUMNS} FROM personalities p
           WHERE p.organization_id = ${organizationId} AND ${keysetAfter(keyset)}
           ORDER BY ${keysetOrder(keyset)}
           LIMIT ${take}`,
      { prepared: true },
    );
  }

  findInOrganization(organizationId: string, id: string): Promise<Personality | null> {
    return this.personalities.findOneBy({ id, organizationId });
  }

  /**
   * The personality, locked for the caller's transaction until it commits: a change read and
   * saved under the lock cannot undo a concurrent one, nor bring back one deleted meanwhile.
   * FOR NO KEY UPDATE, as the UPDATE itself takes: the key share that a reply's memories (and
   * an import) hold on the personality by their foreign key is not waited for, nor blocked.
   */
  lockForUpdate(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<Personality | null> {
    return this.database.repository(Personality, manager).findOne({
      where: { id, organizationId },
      lock: { mode: 'for_no_key_update' },
    });
  }

  save(manager: EntityManager, personality: Personality): Promise<Personality> {
    return this.database.repository(Personality, manager).save(personality);
  }

  /**
   * Only the columns an engine reads, as SQL text: on /v1/respond's path, where building and
   * hydrating a find() cost about twice the CPU of the query itself.
   */
  async findForReply(organizationId: string, id: string): Promise<PersonalityForReply | null> {
    const row = await this.database.row(
      FOR_REPLY.query`SELECT ${FOR_REPLY}
            FROM personalities WHERE id = ${id} AND organization_id = ${organizationId}`,
    );
    return row ?? null;
  }

  /**
   * Which of `ids` are webhook endpoints of the organization: a webhook tool may only call one
   * of its own organization's endpoints.
   */
  async findOwnEndpoints(organizationId: string, ids: string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const rows = await this.database.rows(
      ENDPOINT_ID.query`SELECT ${ENDPOINT_ID} FROM webhook_endpoints
           WHERE organization_id = ${organizationId} AND id = ANY(${ids}::uuid[])`,
    );
    return new Set(rows.map((row) => row.id));
  }

  /** What the audit event names of the deleted personality, or null when there was none. */
  async deleteInOrganization(
    manager: EntityManager,
    organizationId: string,
    id: string,
  ): Promise<{ name: string; sourceSlug: string | null } | null> {
    const row = await this.database.row(
      DELETED_PERSONALITY.query`DELETE FROM personalities
                                 WHERE id = ${id} AND organization_id = ${organizationId}
                                RETURNING ${DELETED_PERSONALITY}`,
      { manager },
    );
    return row ? { name: row.name, sourceSlug: row.source_slug } : null;
  }
}
