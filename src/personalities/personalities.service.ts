import { Injectable, OnApplicationBootstrap } from '@nestjs/common';
import { InjectDataSource, InjectRepository } from '@nestjs/typeorm';
import { isUUID } from 'class-validator';
import type { Pool } from 'pg';
import { DataSource, Repository } from 'typeorm';
import { AuditService } from '../audit/audit.service';
import type { CallerContext } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import { poolOf, withTransaction } from '../database/pg-pool';
import { compareVersions } from '../vocabularies/vocabulary-files';
import { readCatalogFile, SHIPPED_CATALOG_PATH } from './catalog-file';
import {
  CatalogEntryDto,
  PersonalityDto,
  toCatalogEntryResponse,
  toPersonalityResponse,
  UpdatePersonalityDto,
} from './dto/personality.dto';
import { CatalogPersonality } from './entities/catalog-personality.entity';
import type {
  CatalogEntryFile,
  PersonalityReplies,
  PersonalityVoice,
} from './entities/personality-definition';
import { Personality } from './entities/personality.entity';

/** What /v1/respond needs of a personality. */
/** What an engine needs of a personality to write its replies. */
export interface PersonalityForReply {
  id: string;
  name: string;
  description: string;
  traits: string[];
  voice: PersonalityVoice;
  systemPrompt: string;
  /** null: the engine's default model. */
  model: string | null;
  replies: PersonalityReplies;
}

const UPSERT_ENTRY = `
  INSERT INTO catalog_personalities
    (slug, name, description, version, traits, voice, system_prompt, replies)
  VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
  ON CONFLICT (slug) DO UPDATE SET
    name = excluded.name, description = excluded.description, version = excluded.version,
    traits = excluded.traits, voice = excluded.voice, system_prompt = excluded.system_prompt,
    replies = excluded.replies, updated_at = now()`;

@Injectable()
export class PersonalitiesService implements OnApplicationBootstrap {
  private readonly pool: Pool;

  constructor(
    @InjectDataSource() dataSource: DataSource,
    @InjectRepository(CatalogPersonality)
    private readonly catalog: Repository<CatalogPersonality>,
    @InjectRepository(Personality) private readonly personalities: Repository<Personality>,
    private readonly audit: AuditService,
  ) {
    this.pool = poolOf(dataSource);
  }

  /**
   * Seeds the shipped catalog. An entry is written only when it is new or its shipped version is
   * newer than the stored one, so a restart never undoes an operator's CLI import.
   */
  async onApplicationBootstrap(): Promise<void> {
    const shipped = readCatalogFile(SHIPPED_CATALOG_PATH);
    const stored = new Map(
      (await this.catalog.find({ select: { slug: true, version: true } })).map((row) => [
        row.slug,
        row.version,
      ]),
    );
    const due = shipped.filter((entry) => {
      const version = stored.get(entry.slug);
      return version === undefined || compareVersions(entry.version, version) > 0;
    });
    if (due.length > 0) await this.importCatalog(due);
  }

  /** Upserts entries by slug, all or none. */
  async importCatalog(entries: CatalogEntryFile[]): Promise<void> {
    await withTransaction(this.pool, async (client) => {
      for (const entry of entries) {
        await client.query(UPSERT_ENTRY, [
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

  async listCatalog(limit: number, startingAfter?: string): Promise<Page<CatalogEntryDto>> {
    const query = this.catalog
      .createQueryBuilder('entry')
      .orderBy('entry.slug')
      .take(limit + 1);
    if (startingAfter) query.where('entry.slug > :startingAfter', { startingAfter });
    return toPage(await query.getMany(), limit, toCatalogEntryResponse);
  }

  /**
   * Copies every field of the entry into a new row of the organization, in one statement. The
   * jsonb values are copied by value, so later catalog imports cannot reach the clone.
   */
  async cloneFromCatalog(organizationId: string, slug: string): Promise<PersonalityDto> {
    const rows: Array<{ id: string }> = await this.personalities.query(
      `INSERT INTO personalities (organization_id, source_slug, source_version, name, description,
                                  traits, voice, system_prompt, replies)
       SELECT $1, slug, version, name, description, traits, voice, system_prompt, replies
         FROM catalog_personalities WHERE slug = $2
       RETURNING id`,
      [organizationId, slug],
    );
    if (!rows[0]) throw AppError.notFound('Catalog entry');
    return this.get(organizationId, rows[0].id);
  }

  async list(
    organizationId: string,
    limit: number,
    startingAfter?: string,
  ): Promise<Page<PersonalityDto>> {
    const query = this.personalities
      .createQueryBuilder('p')
      .where('p.organization_id = :organizationId', { organizationId })
      .orderBy('p.created_at', 'ASC')
      .addOrderBy('p.id', 'ASC')
      .take(limit + 1);
    if (startingAfter) {
      const known =
        isUUID(startingAfter) &&
        (await this.personalities.existsBy({ id: startingAfter, organizationId }));
      if (!known) {
        throw AppError.validation([
          { field: 'starting_after', problem: 'must be the id of a personality of this list' },
        ]);
      }
      // Compared in SQL: created_at has microseconds, which a JS Date would round away.
      query.andWhere(
        '(p.created_at, p.id) > (SELECT c.created_at, c.id FROM personalities c WHERE c.id = :cursor)',
        { cursor: startingAfter },
      );
    }
    return toPage(await query.getMany(), limit, toPersonalityResponse);
  }

  async get(organizationId: string, id: string): Promise<PersonalityDto> {
    return toPersonalityResponse(await this.find(organizationId, id));
  }

  async update(
    organizationId: string,
    id: string,
    changes: UpdatePersonalityDto,
  ): Promise<PersonalityDto> {
    const personality = await this.find(organizationId, id);
    if (changes.name !== undefined) personality.name = changes.name;
    if (changes.description !== undefined) personality.description = changes.description;
    if (changes.traits !== undefined) personality.traits = changes.traits;
    if (changes.voice !== undefined) personality.voice = { ...changes.voice };
    if (changes.system_prompt !== undefined) personality.systemPrompt = changes.system_prompt;
    if (changes.replies !== undefined) personality.replies = { ...changes.replies };
    if (changes.model !== undefined) personality.model = changes.model;
    return toPersonalityResponse(await this.personalities.save(personality));
  }

  /** Deletes the personality and what it remembers (its memories); billed months remain. */
  async remove(caller: CallerContext, id: string): Promise<void> {
    const { organizationId } = caller;
    await this.personalities.manager.transaction(async (manager) => {
      const rows: Array<{ name: string; source_slug: string | null }> = await manager.query(
        `WITH deleted AS (
           DELETE FROM personalities WHERE id = $1 AND organization_id = $2
           RETURNING name, source_slug)
         SELECT * FROM deleted`,
        [id, organizationId],
      );
      if (!rows[0]) throw AppError.notFound('Personality');
      await this.audit.record(manager, caller, {
        organizationId,
        action: 'personality.deleted',
        target: { type: 'personality', id },
        details: { name: rows[0].name, source_slug: rows[0].source_slug },
      });
    });
  }

  async findForReply(organizationId: string, id: string): Promise<PersonalityForReply> {
    const { rows } = await this.pool.query<PersonalityForReply>({
      name: 'personalities_for_reply',
      text: `SELECT id, name, description, traits, voice, system_prompt AS "systemPrompt", model, replies
               FROM personalities WHERE id = $1 AND organization_id = $2`,
      values: [id, organizationId],
    });
    if (!rows[0]) throw AppError.notFound('Personality');
    return rows[0];
  }

  private async find(organizationId: string, id: string): Promise<Personality> {
    const found = await this.personalities.findOneBy({ id, organizationId });
    if (!found) throw AppError.notFound('Personality');
    return found;
  }
}
