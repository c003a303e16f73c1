import { Injectable } from '@nestjs/common';
import { InjectDataSource } from '@nestjs/typeorm';
import type { Pool, PoolClient } from 'pg';
import QueryStream from 'pg-query-stream';
import { DataSource } from 'typeorm';
import { AppError } from '../common/errors/app-error';
import { poolOf } from '../database/pg-pool';

/** Text is flushed to the response in chunks of about this size. */
const CHUNK_BYTES = 64 * 1024;
/** Rows fetched from the cursor per round trip. */
const CURSOR_BATCH = 1_000;

const ISO = (column: string) =>
  `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** One JSON array of the document: rows of one query, each already JSON text. */
interface Section {
  key: string;
  sql: string;
  params: unknown[];
}

interface OpenedDocument {
  /** The end user as the export's `end_user` JSON. */
  endUserDocument: string;
  client: PoolClient;
  endUserId: string;
  userId: string;
}

/**
 * Export (PMF v1) and subject access documents. Each is written from one REPEATABLE READ
 * snapshot, so its parts agree, and streamed from a server-side cursor: PostgreSQL renders each
 * row as JSON text and the process holds one batch at a time, whatever the user's history.
 */
@Injectable()
export class ExportsService {
  private readonly pool: Pool;

  constructor(@InjectDataSource() dataSource: DataSource) {
    this.pool = poolOf(dataSource);
  }

  /** The PMF v1 document; 404 (before anything is sent) for an unknown or foreign user. */
  async exportDocument(organizationId: string, userId: string): Promise<AsyncIterable<string>> {
    const opened = await this.open(organizationId, userId);
    const head = `{"format":"pmf","version":1,"exported_at":${JSON.stringify(new Date().toISOString())},"end_user":${opened.endUserDocument}`;
    const id = [opened.endUserId];
    return this.write(opened.client, head, [
      {
        key: 'personalities',
        sql: `SELECT json_build_object(
                       'id', p.id, 'source_slug', p.source_slug, 'source_version', p.source_version,
                       'name', p.name, 'description', p.description, 'traits', p.traits,
                       'voice', p.voice, 'system_prompt', p.system_prompt)::text AS doc
                FROM personalities p
               WHERE p.id IN (SELECT personality_id FROM relationship_months WHERE end_user_id = $1
                              UNION SELECT DISTINCT personality_id FROM memories WHERE end_user_id = $1)
               ORDER BY p.created_at, p.id`,
        params: id,
      },
      {
        key: 'relationships',
        sql: `SELECT json_build_object(
                       'personality_id', personality_id, 'month', to_char(month, 'YYYY-MM'),
                       'first_active_at', ${ISO('first_active_at')})::text AS doc
                FROM relationship_months WHERE end_user_id = $1
               ORDER BY month, first_active_at`,
        params: id,
      },
      {
        key: 'memories',
        sql: `SELECT json_build_object(
                       'id', id::text, 'personality_id', personality_id, 'role', role,
                       'content', content,
                       'emotion', CASE WHEN emotion IS NULL THEN NULL
                                  ELSE json_build_object('name', emotion, 'intensity', intensity) END,
                       'vocabulary_version', vocabulary_version,
                       'created_at', ${ISO('created_at')})::text AS doc
                FROM memories WHERE end_user_id = $1 ORDER BY id`,
        params: id,
      },
    ]);
  }

  /** Subject access: every stored row that concerns the user, as the database holds it. */
  async modelDocument(organizationId: string, userId: string): Promise<AsyncIterable<string>> {
    const opened = await this.open(organizationId, userId);
    const head = `{"user_id":${JSON.stringify(opened.userId)},"generated_at":${JSON.stringify(new Date().toISOString())},"tables":{`;
    const id = [opened.endUserId];
    const table = (name: string, order: string): Section => ({
      key: name,
      sql: `SELECT to_jsonb(t)::text AS doc FROM ${name} t WHERE ${name === 'end_users' ? 'id' : 'end_user_id'} = $1 ORDER BY ${order}`,
      params: id,
    });
    return this.write(
      opened.client,
      head,
      [
        table('end_users', 'id'),
        table('relationship_months', 'month, personality_id'),
        table('memories', 'id'),
      ],
      '}}',
    );
  }

  private async open(organizationId: string, userId: string): Promise<OpenedDocument> {
    const client = await this.pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      // The export's end_user section comes with the lookup: one read, inside the try that
      // releases the connection on failure.
      const { rows } = await client.query<{ id: string; user_id: string; doc: string }>(
        `SELECT id, user_id, json_build_object(
                  'user_id', user_id, 'metadata', metadata, 'status', status,
                  'created_at', ${ISO('created_at')}, 'updated_at', ${ISO('updated_at')})::text AS doc
           FROM end_users WHERE organization_id = $1 AND user_id = $2`,
        [organizationId, userId],
      );
      if (!rows[0]) throw AppError.notFound('End user');
      return {
        client,
        endUserId: rows[0].id,
        userId: rows[0].user_id,
        endUserDocument: rows[0].doc,
      };
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release();
      throw error;
    }
  }

  private async *write(
    client: PoolClient,
    head: string,
    sections: Section[],
    tail = '}',
  ): AsyncGenerator<string> {
    let completed = false;
    try {
      let buffer = head;
      for (const [index, section] of sections.entries()) {
        const separator = index === 0 && head.endsWith('{') ? '' : ',';
        buffer += `${separator}${JSON.stringify(section.key)}:[`;
        let first = true;
        const rows = client.query(
          new QueryStream(section.sql, section.params, { batchSize: CURSOR_BATCH }),
        );
        for await (const row of rows as AsyncIterable<{ doc: string }>) {
          buffer += first ? row.doc : `,${row.doc}`;
          first = false;
          if (buffer.length >= CHUNK_BYTES) {
            yield buffer;
            buffer = '';
          }
        }
        buffer += ']';
      }
      yield buffer + tail;
      await client.query('COMMIT');
      completed = true;
    } finally {
      // A connection left mid-cursor (an error, or the reader went away) is closed, not reused.
      client.release(completed ? undefined : true);
    }
  }
}
