import { randomUUID } from 'node:crypto';
import type { Database } from '../../src/database/database';
import { sql, withEntries } from '../../src/database/sql';
import { memoriesInsertStep, type NewMemory } from '../../src/memory/memories.step';

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

  /**
   * Memories of one end user with one personality, in the order given, a second apart, the user
   * and the personality taking turns, written by the statement a reply writes them with
   * (memoriesInsertStep). Answers every memory of the end user, oldest first.
   */
  async memories(
    organizationId: string,
    endUserId: string,
    personalityId: string,
    contents: string[],
  ): Promise<Array<{ id: string; content: string }>> {
    const start = Date.parse('2031-03-01T10:00:00Z');
    const memories: NewMemory[] = contents.map((content, index) => ({
      organizationId,
      endUserId,
      personalityId,
      role: index % 2 === 0 ? 'user' : 'personality',
      content,
      emotion: null,
      intensity: null,
      vocabularyVersion: null,
      createdAt: new Date(start + index * 1_000),
      safety: null,
    }));
    await this.database.rows(withEntries([memoriesInsertStep(memories)], sql`SELECT 1`));
    return this.database.rows<{ id: string; content: string }>(
      sql`SELECT id::text AS id, content FROM memories WHERE end_user_id = ${endUserId} ORDER BY id`,
    );
  }

  /**
   * A fact the engine learned about the end user (source `engine`), from the memory `memoryId`
   * if given, its key its content in lower case.
   */
  async engineFact(
    organizationId: string,
    endUserId: string,
    content: string,
    memoryId: string | null = null,
  ): Promise<void> {
    await this.database.count(
      sql`INSERT INTO end_user_facts (organization_id, end_user_id, content, content_key, source,
                                      memory_id, created_at, updated_at)
          VALUES (${organizationId}, ${endUserId}, ${content}, lower(${content}), 'engine',
                  ${memoryId}::bigint, now(), now())`,
    );
  }

  private async id(statement: ReturnType<typeof sql>): Promise<string> {
    const [row] = await this.database.rows<{ id: string }>(statement);
    return row.id;
  }

  /** The organization's token budgets: its organization_limits row, as a PATCH writes it. */
  async limits(
    organizationId: string,
    budgets: { monthlyTokenBudget?: number; endUserDailyTokenBudget?: number },
  ): Promise<void> {
    await this.database.count(
      sql`INSERT INTO organization_limits (organization_id, monthly_token_budget,
                                           end_user_daily_token_budget)
          VALUES (${organizationId}, ${budgets.monthlyTokenBudget ?? null},
                  ${budgets.endUserDailyTokenBudget ?? null})`,
    );
  }

  /** A user (verified address) who is a member of the organization with `role`; answers its id. */
  async member(
    organizationId: string,
    role: 'owner' | 'admin' | 'member' = 'owner',
  ): Promise<string> {
    const userId = await this.id(
      sql`INSERT INTO users (email, password_hash, email_verified_at)
          VALUES (${`user-${randomUUID()}@example.test`}, 'not-a-hash', now()) RETURNING id`,
    );
    await this.database.count(
      sql`INSERT INTO memberships (organization_id, user_id, role)
          VALUES (${organizationId}, ${userId}, ${role})`,
    );
    return userId;
  }

  /** The organization's token counts of a month (token_usage_months), as replies add them. */
  async monthTokens(
    organizationId: string,
    month: string,
    tokens: { prompt: number; completion: number; requests?: number },
  ): Promise<void> {
    await this.database.count(
      sql`INSERT INTO token_usage_months (organization_id, month, requests, prompt_tokens,
                                          completion_tokens, cached_tokens)
          VALUES (${organizationId}, ${month}, ${tokens.requests ?? 1}, ${tokens.prompt},
                  ${tokens.completion}, 0)`,
    );
  }
}
