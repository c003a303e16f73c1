import { randomUUID } from 'node:crypto';
import type { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';

/**
 * Test data written straight into the database, for the specs that run one module alone
 * (test/services): the rows a module's rules need around it, without the HTTP API or the modules
 * that own them. Each call makes fresh rows: specs never share them.
 */
export class Factory {
  constructor(private readonly database: Database) {}

  async organization(): Promise<string> {
    return this.id(
      sql`INSERT INTO organizations (name) VALUES (${`org-${randomUUID()}`}) RETURNING id`,
    );
  }

  /** A personality of the organization (English), with the columns a reply reads. */
  async personality(organizationId: string, name = 'Companion'): Promise<string> {
    return this.id(
      sql`INSERT INTO personalities (organization_id, source_slug, source_version, name,
                                     description, traits, voice, system_prompt, replies)
          VALUES (${organizationId}, 'factory', '1', ${name}, 'A companion', '[]', '{}',
                  'Be kind.', '{}')
          RETURNING id`,
    );
  }

  /** An active end user of the organization; answers its internal id. */
  async endUser(organizationId: string, userId: string): Promise<string> {
    return this.id(
      sql`INSERT INTO end_users (organization_id, user_id) VALUES (${organizationId}, ${userId})
          RETURNING id`,
    );
  }

  private async id(statement: ReturnType<typeof sql>): Promise<string> {
    const [row] = await this.database.rows<{ id: string }>(statement);
    return row.id;
  }
}
