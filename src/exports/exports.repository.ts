import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool } from 'pg';
import { DataSource } from 'typeorm';
import { poolOf } from '../database/pg-pool';

const ISO = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** An end user found for a document, with what bounds the document's reads. */
export interface DocumentSubject {
  /** The end_users row's id. */
  id: string;
  userId: string;
  /** The end user as the export's `end_user` JSON. */
  exportDocument: string;
  /** The end user's stored row, as `to_jsonb` renders it. */
  rowDocument: string;
  /** The newest memory at the start: later ones belong to a later document. */
  lastMemoryId: string;
}

/** One page of a section: rows already rendered as JSON text, and where the next page starts. */
export interface SectionPage {
  docs: string[];
  /** null after the last page. */
  next: unknown[] | null;
}

/** One array of a document, read a page at a time by key (keyset paging). */
export interface Section {
  key: string;
  first: unknown[];
  page(subject: DocumentSubject, after: unknown[], limit: number): Promise<SectionPage>;
}

/** A rendered row and its sort key as text (text round-trips timestamps to the microsecond). */
interface DocRow {
  doc: string;
  [cursor: string]: string;
}

/**
 * The reads of the export and subject-access documents. Each is one short statement on the
 * shared pool, keyed by the last row of the previous page, so a document never holds a
 * connection (or a transaction) while its client reads slowly or not at all.
 */
@Injectable()
export class ExportsRepository {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  async findSubject(organizationId: string, userId: string): Promise<DocumentSubject | null> {
    const { rows } = await this.pool.query<DocumentSubject>(
      `SELECT e.id, e.user_id AS "userId",
              json_build_object(
                'user_id', e.user_id, 'metadata', e.metadata, 'status', e.status,
                'created_at', ${ISO('e.created_at')}, 'updated_at', ${ISO('e.updated_at')}
              )::text AS "exportDocument",
              to_jsonb(e)::text AS "rowDocument",
              COALESCE((SELECT max(m.id) FROM memories m WHERE m.end_user_id = e.id), 0)::text
                AS "lastMemoryId"
         FROM end_users e
        WHERE e.organization_id = $1 AND e.user_id = $2`,
      [organizationId, userId],
    );
    return rows[0] ?? null;
  }

  /** The sections of the PMF v1 document, in the document's order. */
  readonly exportSections: Section[] = [
    this.section(
      'personalities',
      ['-infinity', '00000000-0000-0000-0000-000000000000'],
      `SELECT json_build_object(
                'id', p.id, 'source_slug', p.source_slug, 'source_version', p.source_version,
                'name', p.name, 'description', p.description, 'traits', p.traits,
                'voice', p.voice, 'system_prompt', p.system_prompt)::text AS doc,
              p.created_at::text AS c1, p.id::text AS c2
         FROM personalities p
        WHERE p.id IN (SELECT personality_id FROM relationship_months WHERE end_user_id = $1
                       UNION SELECT DISTINCT personality_id FROM memories WHERE end_user_id = $1)
          AND (p.created_at, p.id) > ($2::timestamptz, $3::uuid)
        ORDER BY p.created_at, p.id
        LIMIT $4`,
    ),
    this.section(
      'relationships',
      ['-infinity', '00000000-0000-0000-0000-000000000000'],
      `SELECT json_build_object(
                'personality_id', personality_id, 'month', to_char(month, 'YYYY-MM'),
                'first_active_at', ${ISO('first_active_at')})::text AS doc,
              month::text AS c1, personality_id::text AS c2
         FROM relationship_months
        WHERE end_user_id = $1 AND (month, personality_id) > ($2::date, $3::uuid)
        ORDER BY month, personality_id
        LIMIT $4`,
    ),
    this.memorySection(
      `json_build_object(
         'id', id::text, 'personality_id', personality_id, 'role', role, 'content', content,
         'emotion', CASE WHEN emotion IS NULL THEN NULL
                    ELSE json_build_object('name', emotion, 'intensity', intensity) END,
         'vocabulary_version', vocabulary_version,
         'created_at', ${ISO('created_at')})::text`,
    ),
  ];

  /** The tables of the subject-access document after `end_users`, as stored. */
  readonly modelSections: Section[] = [
    this.section(
      'relationship_months',
      ['-infinity', '00000000-0000-0000-0000-000000000000'],
      `SELECT to_jsonb(t)::text AS doc, t.month::text AS c1, t.personality_id::text AS c2
         FROM relationship_months t
        WHERE t.end_user_id = $1 AND (t.month, t.personality_id) > ($2::date, $3::uuid)
        ORDER BY t.month, t.personality_id
        LIMIT $4`,
    ),
    this.memorySection('to_jsonb(t)::text'),
  ];

  /**
   * Memories up to the document's start, by id. The page is limited before it is rendered: with
   * stale statistics (a bulk import) the planner sorts the user's rows, and rendering them all
   * for every page made an export quadratic.
   */
  private memorySection(render: string): Section {
    const sql = `SELECT ${render} AS doc, t.id::text AS c1
                   FROM (SELECT * FROM memories
                          WHERE end_user_id = $1 AND id > $2::bigint AND id <= $3::bigint
                          ORDER BY id LIMIT $4) t
                  ORDER BY t.id`;
    return {
      key: 'memories',
      first: ['0'],
      page: async (subject, after, limit) =>
        this.readPage(sql, [subject.id, after[0], subject.lastMemoryId, limit], limit, 1),
    };
  }

  private section(key: string, first: unknown[], sql: string): Section {
    return {
      key,
      first,
      page: (subject, after, limit) => this.readPage(sql, [subject.id, ...after, limit], limit, 2),
    };
  }

  private async readPage(
    sql: string,
    params: unknown[],
    limit: number,
    cursorColumns: number,
  ): Promise<SectionPage> {
    const { rows } = await this.pool.query<DocRow>(sql, params);
    const last = rows[rows.length - 1];
    return {
      docs: rows.map((row) => row.doc),
      next:
        rows.length < limit || !last
          ? null
          : Array.from({ length: cursorColumns }, (_, i) => last[`c${i + 1}`]),
    };
  }
}
