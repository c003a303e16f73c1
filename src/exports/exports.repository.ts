import { Injectable } from '@nestjs/common';
import { Columns, type RowOf } from '../database/columns';
import { Database } from '../database/database';
import { isoTime } from '../database/iso-time';
import { type Sql, sql } from '../database/sql';
import type { EndUser } from '../end-users/entities/end-user.entity';
import { endUserSubject } from '../idempotency/end-user-answers';
import { ERASED_TARGET_ID } from '../audit/erased-target';

/** The key before any row of a section ordered by (time, uuid). */
const FIRST_BY_TIME_AND_ID = ['-infinity', '00000000-0000-0000-0000-000000000000'];

/** An end user found for a document, with what bounds the document's reads. */
const SUBJECT = Columns.propertiesOf<EndUser>('e')('id', 'organizationId', 'userId').and(
  Columns.computed<{
    /** The end user as the export's `end_user` JSON. */
    exportDocument: string;
    /** The end user's stored row, as `to_jsonb` renders it. */
    rowDocument: string;
    /** The newest memory at the start: later ones belong to a later document. */
    lastMemoryId: string;
  }>({
    exportDocument: sql`json_build_object(
        'user_id', e.user_id, 'metadata', e.metadata, 'status', e.status,
        'created_at', ${isoTime('e.created_at')}, 'updated_at', ${isoTime('e.updated_at')}
      )::text`,
    rowDocument: sql`to_jsonb(e)::text`,
    lastMemoryId: sql`COALESCE((SELECT max(m.id) FROM memories m WHERE m.end_user_id = e.id), 0)::text`,
  }),
);

export type DocumentSubject = RowOf<typeof SUBJECT>;

const REMAINS = Columns.computed<{ remains: boolean }>({ remains: sql`true` });

/** One page of a section: rows already rendered as JSON text, and where the next page starts. */
export interface SectionPage {
  docs: string[];
  /** null after the last page. */
  next: string[] | null;
}

/** One array of a document, read a page at a time by key (keyset paging). */
export interface Section {
  key: string;
  first: string[];
  page(subject: DocumentSubject, after: string[], limit: number): Promise<SectionPage>;
}

/** A rendered row and its sort key as text (text round-trips timestamps to the microsecond). */
interface DocRow {
  doc: string;
  [cursor: string]: string;
}

/** What a section's page selects: each row rendered (`doc`), then its key (c1, c2). */
function pageOf(doc: Sql, ...key: Sql[]): Columns<DocRow> {
  return Columns.computed<DocRow>({
    doc,
    ...Object.fromEntries(key.map((column, index) => [`c${index + 1}`, column])),
  });
}

/** The PMF v1 document's rows, as the export shows them. */
const PERSONALITY_DOCS = pageOf(
  sql`json_build_object(
        'id', p.id, 'source_slug', p.source_slug, 'source_version', p.source_version,
        'name', p.name, 'description', p.description, 'traits', p.traits,
        'voice', p.voice, 'system_prompt', p.system_prompt, 'language', p.language,
        'replies', p.replies)::text`,
  sql`p.created_at::text`,
  sql`p.id::text`,
);

const RELATIONSHIP_DOCS = pageOf(
  sql`json_build_object(
        'personality_id', personality_id, 'month', to_char(month, 'YYYY-MM'),
        'first_active_at', ${isoTime('first_active_at')})::text`,
  sql`month::text`,
  sql`personality_id::text`,
);

const MEMORY_DOCS = pageOf(
  sql`json_build_object(
        'id', id::text, 'personality_id', personality_id, 'role', role, 'content', content,
        'emotion', CASE WHEN emotion IS NULL THEN NULL
                   ELSE json_build_object('name', emotion, 'intensity', intensity) END,
        'vocabulary_version', vocabulary_version,
        'created_at', ${isoTime('created_at')}, 'safety', safety, 'tool_calls', tool_calls)::text`,
  sql`t.id::text`,
);

const FACT_DOCS = pageOf(
  sql`json_build_object(
        'id', t.id, 'content', t.content, 'source', t.source, 'memory_id', t.memory_id::text,
        'created_at', ${isoTime('t.created_at')}, 'updated_at', ${isoTime('t.updated_at')})::text`,
  sql`t.created_at::text`,
  sql`t.id::text`,
);

/** The subject-access document's rows, as stored. */
const RELATIONSHIP_MONTH_ROWS = pageOf(
  sql`to_jsonb(t)::text`,
  sql`t.month::text`,
  sql`t.personality_id::text`,
);
const MEMORY_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.id::text`);
const FACT_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.created_at::text`, sql`t.id::text`);
const TOKEN_MONTH_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.month::text`);
const TOKEN_DAY_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.day::text`);
const TOOL_TURN_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.created_at::text`, sql`t.id`);
const STORED_ANSWER_ROWS = pageOf(sql`to_jsonb(t)::text`, sql`t.created_at::text`, sql`t.key`);
/**
 * An audit event about the end user, without what it says of the one who acted (their id, their
 * address, their request's id): the audit log is an admin's to read (contract §18), and a read
 * key's subject access gave out the staff's or server's address (found by review).
 */
const AUDIT_EVENT_ROWS = pageOf(
  sql`(to_jsonb(t) - 'actor_id' - 'ip' - 'request_id')::text`,
  sql`t.created_at::text`,
  sql`t.id::text`,
);

/**
 * The reads of the export and subject-access documents. Each is one short statement on the
 * shared pool, keyed by the last row of the previous page, so a document never holds a
 * connection (or a transaction) while its client reads slowly or not at all.
 */
@Injectable()
export class ExportsRepository {
  constructor(private readonly database: Database) {}

  async findSubject(organizationId: string, userId: string): Promise<DocumentSubject | null> {
    const row = await this.database.row(
      SUBJECT.query`SELECT ${SUBJECT}
         FROM end_users e
        WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}`,
    );
    return row ?? null;
  }

  /**
   * Whether the subject's row is still there. Erasure deletes it in the transaction that deletes
   * everything else of theirs, so a document whose pages were read across that commit is told
   * apart from a complete one.
   */
  async subjectRemains(subject: DocumentSubject): Promise<boolean> {
    const row = await this.database.row(
      REMAINS.query`SELECT ${REMAINS} FROM end_users WHERE id = ${subject.id}`,
    );
    return row !== undefined;
  }

  /** The sections of the PMF v1 document, in the document's order. */
  readonly exportSections: Section[] = [
    this.section(
      'personalities',
      FIRST_BY_TIME_AND_ID,
      (subject, [at, id], limit) =>
        PERSONALITY_DOCS.query`SELECT ${PERSONALITY_DOCS}
            FROM personalities p
           WHERE p.organization_id = ${subject.organizationId}
             AND p.id IN (SELECT personality_id FROM relationship_months WHERE end_user_id = ${subject.id}
                          UNION SELECT DISTINCT personality_id FROM memories WHERE end_user_id = ${subject.id})
             AND (p.created_at, p.id) > (${at}::timestamptz, ${id}::uuid)
           ORDER BY p.created_at, p.id
           LIMIT ${limit}`,
    ),
    this.section(
      'relationships',
      FIRST_BY_TIME_AND_ID,
      (subject, [month, id], limit) =>
        RELATIONSHIP_DOCS.query`SELECT ${RELATIONSHIP_DOCS}
            FROM relationship_months
           WHERE end_user_id = ${subject.id} AND (month, personality_id) > (${month}::date, ${id}::uuid)
           ORDER BY month, personality_id
           LIMIT ${limit}`,
    ),
    this.memorySection(MEMORY_DOCS),
    this.factSection(FACT_DOCS),
  ];

  /** The tables of the subject-access document after `end_users`, as stored. */
  readonly modelSections: Section[] = [
    this.section(
      'relationship_months',
      FIRST_BY_TIME_AND_ID,
      (subject, [month, id], limit) =>
        RELATIONSHIP_MONTH_ROWS.query`SELECT ${RELATIONSHIP_MONTH_ROWS}
            FROM relationship_months t
           WHERE t.end_user_id = ${subject.id}
             AND (t.month, t.personality_id) > (${month}::date, ${id}::uuid)
           ORDER BY t.month, t.personality_id
           LIMIT ${limit}`,
    ),
    this.memorySection(MEMORY_ROWS),
    this.factSection(FACT_ROWS, 'end_user_facts'),
    // Their tokens: by month (the `end_user` breakdown), and today's against their daily budget.
    this.section(
      'token_usage_end_user_months',
      ['-infinity'],
      (subject, [month], limit) =>
        TOKEN_MONTH_ROWS.query`SELECT ${TOKEN_MONTH_ROWS}
            FROM token_usage_end_user_months t
           WHERE t.end_user_id = ${subject.id} AND t.month > ${month}::date
           ORDER BY t.month
           LIMIT ${limit}`,
    ),
    this.section(
      'end_user_token_days',
      ['-infinity'],
      (subject, [day], limit) =>
        TOKEN_DAY_ROWS.query`SELECT ${TOKEN_DAY_ROWS}
            FROM end_user_token_days t
           WHERE t.end_user_id = ${subject.id} AND t.day > ${day}::date
           ORDER BY t.day
           LIMIT ${limit}`,
    ),
    // A turn paused for client tools holds their message and the calls so far (contract §26).
    this.section(
      'tool_turns',
      ['-infinity', ''],
      (subject, [at, id], limit) =>
        TOOL_TURN_ROWS.query`SELECT ${TOOL_TURN_ROWS}
            FROM tool_turns t
           WHERE t.end_user_id = ${subject.id}
             AND (t.created_at, t.id) > (${at}::timestamptz, ${id}::text)
           ORDER BY t.created_at, t.id
           LIMIT ${limit}`,
    ),
    // The answers kept for a replay of their keyed requests (a reply's text, their metadata);
    // not one forgotten (a memory or fact of theirs deleted while its request ran).
    this.section(
      'idempotency_keys',
      ['-infinity', ''],
      (subject, [at, key], limit) =>
        STORED_ANSWER_ROWS.query`SELECT ${STORED_ANSWER_ROWS}
            FROM idempotency_keys t
           WHERE t.scope_type = 'organization' AND t.scope_id = ${subject.organizationId}
             AND t.subject = ${endUserSubject(subject.userId)} AND NOT t.answer_forgotten
             AND (t.created_at, t.key) > (${at}::timestamptz, ${key}::text)
           ORDER BY t.created_at, t.key
           LIMIT ${limit}`,
    ),
    // What the organization's audit log says was done to them (a flagged conversation, …). Not
    // for a user_id spelled as the erased ones' target (found by review): those events are
    // every erased end user's, not this one's.
    this.section(
      'audit_events',
      FIRST_BY_TIME_AND_ID,
      (subject, [at, id], limit) =>
        AUDIT_EVENT_ROWS.query`SELECT ${AUDIT_EVENT_ROWS}
            FROM audit_events t
           WHERE t.organization_id = ${subject.organizationId}
             AND t.target_type = 'end_user' AND t.target_id = ${subject.userId}
             AND t.target_id <> ${ERASED_TARGET_ID}
             AND (t.created_at, t.id) > (${at}::timestamptz, ${id}::uuid)
           ORDER BY t.created_at, t.id
           LIMIT ${limit}`,
    ),
  ];

  /**
   * Memories up to the document's start, by id. The page is limited before it is rendered: with
   * stale statistics (a bulk import) the planner sorts the user's rows, and rendering them all
   * for every page made an export quadratic.
   */
  private memorySection(rows: Columns<DocRow>): Section {
    return this.section(
      'memories',
      ['0'],
      (subject, [after], limit) =>
        rows.query`SELECT ${rows}
            FROM (SELECT * FROM memories
                   WHERE end_user_id = ${subject.id} AND id > ${after}::bigint
                     AND id <= ${subject.lastMemoryId}::bigint
                   ORDER BY id LIMIT ${limit}) t
           ORDER BY t.id`,
    );
  }

  /**
   * Facts, oldest first (by creation, then id): the order in which they were learned or written.
   * A fact learned from a message newer than the document's start points at a memory the
   * document does not hold, so it belongs to a later document too; every other fact is in.
   */
  private factSection(rows: Columns<DocRow>, key = 'facts'): Section {
    return this.section(
      key,
      FIRST_BY_TIME_AND_ID,
      (subject, [at, id], limit) =>
        rows.query`SELECT ${rows}
            FROM end_user_facts t
           WHERE t.end_user_id = ${subject.id}
             AND (t.memory_id IS NULL OR t.memory_id <= ${subject.lastMemoryId}::bigint)
             AND (t.created_at, t.id) > (${at}::timestamptz, ${id}::uuid)
           ORDER BY t.created_at, t.id
           LIMIT ${limit}`,
    );
  }

  /** A section read by `page`, whose rows carry the next page's key as c1 (, c2). */
  private section(
    key: string,
    first: string[],
    page: (subject: DocumentSubject, after: string[], limit: number) => Sql<DocRow>,
  ): Section {
    return {
      key,
      first,
      page: async (subject, after, limit) => {
        const rows = await this.database.rows(page(subject, after, limit));
        const last = rows[rows.length - 1];
        return {
          docs: rows.map((row) => row.doc),
          next:
            rows.length < limit || !last ? null : first.map((_, index) => last[`c${index + 1}`]),
        };
      },
    };
  }
}
