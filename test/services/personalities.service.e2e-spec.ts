import type { TestingModule } from '@nestjs/testing';
import { getDataSourceToken } from '@nestjs/typeorm';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { DataSource } from 'typeorm';
import type { ApiKeyCaller } from '../../src/common/auth/caller';
import { Database } from '../../src/database/database';
import { isDeadlock } from '../../src/database/sql-state';
import type { CatalogEntryFile } from '../../src/personalities/entities/personality-definition';
import { PersonalitiesModule } from '../../src/personalities/personalities.module';
import { PersonalitiesService } from '../../src/personalities/personalities.service';
import { toolSchemas } from '../../src/tools/tool-schemas';
import { IdempotencyService } from '../../src/idempotency/idempotency.service';
import { expectAppError } from '../support/assertions';
import { Factory } from '../support/factory';
import { HeldTransaction } from '../support/locks';
import { moduleAlone } from '../support/module-alone';

const shipped = JSON.parse(
  readFileSync(join(__dirname, '../../src/personalities/data/catalog.json'), 'utf8'),
) as CatalogEntryFile[];

/**
 * PersonalitiesService on a real PostgreSQL, without HTTP ("medium" spec): the module with what
 * it imports (audit, webhooks' events, idempotency, the organizations whose accounts a tool's
 * schema is checked in) and the database. The rules are called directly;
 * the contract over HTTP stays in personalities.e2e-spec.ts.
 */
describe('PersonalitiesService (real database)', () => {
  let moduleRef: TestingModule;
  let service: PersonalitiesService;
  let dataSource: DataSource;

  async function newOrganization(): Promise<string> {
    const rows: Array<{ id: string }> = await dataSource.query(
      `INSERT INTO organizations (name) VALUES ($1) RETURNING id`,
      [`org-${randomUUID()}`],
    );
    return rows[0].id;
  }

  function apiKeyCaller(organizationId: string): ApiKeyCaller {
    return {
      kind: 'api_key',
      apiKeyId: randomUUID(),
      organizationId,
      scopes: ['read_write'],
      requestId: 'spec',
    };
  }

  beforeAll(async () => {
    // The local engine allows no model unless the operator lists some (contract §25).
    moduleRef = await moduleAlone([PersonalitiesModule], { OPENAI_ALLOWED_MODELS: 'gpt-4o-mini' });
    service = moduleRef.get(PersonalitiesService);
    dataSource = moduleRef.get<DataSource>(getDataSourceToken());
  });
  afterAll(() => moduleRef?.close());

  it('seeds the shipped catalog and clones an entry field by field, by value', async () => {
    const organizationId = await newOrganization();
    const entry = shipped.find((candidate) => candidate.slug === 'sage-mentor')!;
    const clone = await service.cloneFromCatalog(organizationId, 'sage-mentor');
    expect(clone).toEqual({
      id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      source_slug: 'sage-mentor',
      source_version: entry.version,
      model: null,
      language: 'en',
      name: entry.name,
      description: entry.description,
      traits: entry.traits,
      voice: entry.voice,
      system_prompt: entry.system_prompt,
      tools: [],
      replies: entry.replies,
      created_at: expect.any(String),
      updated_at: expect.any(String),
    });

    // A later import of the entry does not reach the clone.
    // The catalog is shared by every spec: it is put back whatever the assertion says.
    try {
      await service.importCatalog([
        { ...entry, name: 'Renamed in the catalog', version: '99.0.0' },
      ]);
      expect((await service.get(organizationId, clone.id)).name).toBe(entry.name);
    } finally {
      await service.importCatalog([entry]);
    }

    await expectAppError(service.cloneFromCatalog(organizationId, 'no-such-slug'), 'not_found');
  });

  it("checks a tool's schema in the turn of the organization's account: the user who made it", async () => {
    const [{ id: maker }]: Array<{ id: string }> = await dataSource.query(
      `INSERT INTO users (email, password_hash) VALUES ($1, 'not-a-hash') RETURNING id`,
      [`maker-${randomUUID()}@example.test`],
    );
    const organizationId = await newOrganization();
    await dataSource.query(`UPDATE organizations SET created_by_user_id = $1 WHERE id = $2`, [
      maker,
      organizationId,
    ]);
    const personality = await service.cloneFromCatalog(organizationId, 'sage-mentor');
    const checked = jest.spyOn(toolSchemas, 'problemOf');
    try {
      await service.update(organizationId, personality.id, {
        tools: [
          {
            name: 'opening_hours',
            description: 'The shop hours of a day',
            parameters: { type: 'object', properties: { day: { type: 'string' } } },
            execution: 'client',
          },
        ],
      });
      expect(checked).toHaveBeenCalledWith(
        { organizationId, account: maker },
        expect.objectContaining({ type: 'object' }),
      );
    } finally {
      checked.mockRestore();
    }
  });

  it('keeps each organization to its own personalities', async () => {
    const mine = await newOrganization();
    const theirs = await newOrganization();
    const own = await service.cloneFromCatalog(mine, 'atlas-stoic');
    const foreign = await service.cloneFromCatalog(theirs, 'atlas-stoic');

    const page = await service.list(mine, 100);
    expect(page.data.map((personality) => personality.id)).toEqual([own.id]);
    await expectAppError(service.get(mine, foreign.id), 'not_found');
    await expectAppError(service.update(mine, foreign.id, { name: 'Stolen' }), 'not_found');
    await expectAppError(service.findForReply(mine, foreign.id), 'not_found');
    await expectAppError(service.remove(apiKeyCaller(mine), foreign.id), 'not_found');
    // A foreign id is no cursor of this list.
    await expectAppError(service.list(mine, 10, foreign.id), 'validation_failed');

    expect((await service.get(theirs, foreign.id)).name).toBe(foreign.name);
  });

  it('pages oldest first by (created_at, id)', async () => {
    const organizationId = await newOrganization();
    const ids: string[] = [];
    for (const slug of ['sage-mentor', 'atlas-stoic', 'sage-mentor']) {
      ids.push((await service.cloneFromCatalog(organizationId, slug)).id);
    }
    const first = await service.list(organizationId, 2);
    expect(first.data.map((personality) => personality.id)).toEqual(ids.slice(0, 2));
    expect(first.has_more).toBe(true);
    const rest = await service.list(organizationId, 2, ids[1]);
    expect(rest.data.map((personality) => personality.id)).toEqual([ids[2]]);
    expect(rest.has_more).toBe(false);
  });

  it('patches only the given fields; model null restores the default', async () => {
    const organizationId = await newOrganization();
    const clone = await service.cloneFromCatalog(organizationId, 'sage-mentor');
    const voice = { tone: 'dry', formality: 'formal' as const, style_notes: 'Few words.' };
    const patched = await service.update(organizationId, clone.id, {
      name: 'Sage II',
      voice,
      model: 'gpt-4o-mini',
      language: 'de',
    });
    expect(patched).toEqual({
      ...clone,
      name: 'Sage II',
      voice,
      model: 'gpt-4o-mini',
      language: 'de',
      updated_at: expect.any(String),
    });
    expect(Date.parse(patched.updated_at)).toBeGreaterThanOrEqual(Date.parse(clone.updated_at));

    const reply = await service.findForReply(organizationId, clone.id);
    expect(reply).toEqual({
      id: clone.id,
      name: 'Sage II',
      description: clone.description,
      traits: clone.traits,
      voice,
      systemPrompt: clone.system_prompt,
      tools: [],
      model: 'gpt-4o-mini',
      language: 'de',
      searchConfig: 'german',
      replies: clone.replies,
    });

    // The read above is cached for replies; a change is seen by the very next one.
    const restored = await service.update(organizationId, clone.id, { model: null });
    expect(restored.model).toBeNull();
    // Only the models OPENAI_ALLOWED_MODELS lists (contract §25).
    await expectAppError(
      service.update(organizationId, clone.id, { model: 'o1-pro' }),
      'validation_failed',
    );
    expect(restored.name).toBe('Sage II');
    expect((await service.findForReply(organizationId, clone.id)).model).toBeNull();
  });

  it('deletes with an audit event in the same transaction', async () => {
    const organizationId = await newOrganization();
    const clone = await service.cloneFromCatalog(organizationId, 'atlas-stoic');
    const caller = apiKeyCaller(organizationId);
    await service.findForReply(organizationId, clone.id);
    await service.remove(caller, clone.id);
    await expectAppError(service.get(organizationId, clone.id), 'not_found');
    await expectAppError(service.findForReply(organizationId, clone.id), 'not_found');
    const events: Array<Record<string, unknown>> = await dataSource.query(
      `SELECT action, actor_type, actor_id, target_type, target_id, details, request_id
         FROM audit_events WHERE organization_id = $1`,
      [organizationId],
    );
    expect(events).toEqual([
      {
        action: 'personality.deleted',
        actor_type: 'api_key',
        actor_id: caller.apiKeyId,
        target_type: 'personality',
        target_id: clone.id,
        details: { name: clone.name, source_slug: 'atlas-stoic' },
        request_id: 'spec',
      },
    ]);
    await expectAppError(service.remove(caller, clone.id), 'not_found');
  });

  it('forgets the answers of its keyed replies, those claimed while its deletion ran too', async () => {
    const organizationId = await newOrganization();
    const clone = await service.cloneFromCatalog(organizationId, 'atlas-stoic');
    const idempotency = moduleRef.get(IdempotencyService);
    const claim = async (key: string) => {
      const begun = await idempotency.begin(
        { scopeType: 'organization', scopeId: organizationId, key },
        randomUUID(),
        Buffer.alloc(32, 3),
        [],
        { carriesData: true, hint: 'eve@example.com', personalityHint: clone.id },
      );
      if (begun.kind !== 'claimed') throw new Error(`not claimed: ${begun.kind}`);
      return begun.claim;
    };
    const stored = (key: string) =>
      dataSource.query(
        `SELECT response_status FROM idempotency_keys WHERE scope_id = $1 AND key = $2`,
        [organizationId, key],
      );
    const before = await claim('before');
    // The deletion's step waits on the first key's row; a reply claimed meanwhile is not in
    // what its statement saw.
    const held = await HeldTransaction.begin();
    let meanwhile;
    try {
      await held.run(
        `SELECT 1 FROM idempotency_keys WHERE scope_id = $1 AND key = 'before' FOR UPDATE`,
        [organizationId],
      );
      const removing = service.remove(apiKeyCaller(organizationId), clone.id);
      await held.untilWaitedOn();
      meanwhile = await claim('meanwhile');
      await held.commit();
      await removing;
    } finally {
      await held.end();
    }
    await idempotency.settleAnswer(before, 200, { reply: { text: 'before' } });
    await idempotency.settleAnswer(meanwhile, 200, { reply: { text: 'meanwhile' } });
    // Neither is kept for a replay: the first was marked by the deletion's own statement, the
    // second by the pass after its commit (without it, its answer was kept for 24 hours).
    expect(await stored('before')).toEqual([]);
    expect(await stored('meanwhile')).toEqual([]);
  });

  it('runs again when it deadlocks with the erasure of one of its end users', async () => {
    // PostgreSQL rolls back the session whose deadlock_timeout (1 s) passes first once the
    // cycle exists: the deletion, which waits first, unless the erasure's closing statement
    // comes more than a second later (a loaded machine). Then the erasure is the one rolled
    // back and the case is set up again: what is asserted is the deletion's own rollback.
    for (let attempt = 1; ; attempt += 1) {
      const outcome = await deletionMeetsErasure();
      if (outcome === 'deletion rolled back') break;
      if (attempt === 5) throw new Error('PostgreSQL rolled the erasure back five times in a row');
    }
  });

  /** The deadlock of a personality's deletion and an erasure: which one PostgreSQL rolled back. */
  async function deletionMeetsErasure(): Promise<'deletion rolled back' | 'erasure rolled back'> {
    const organizationId = await newOrganization();
    const clone = await service.cloneFromCatalog(organizationId, 'atlas-stoic');
    const factory = new Factory(moduleRef.get(Database));
    const endUserId = await factory.endUser(organizationId, 'nia');
    const [memory] = await factory.memories(organizationId, endUserId, clone.id, [
      'I keep bees',
      'Lovely',
    ]);
    await dataSource.query(
      `INSERT INTO end_user_facts (organization_id, end_user_id, content, content_key, source,
                                   memory_id, created_at, updated_at)
       VALUES ($1, $2, 'Keeps bees', 'keeps bees', 'engine', $3, now(), now())`,
      [organizationId, endUserId, memory.id],
    );
    // The erasure as ErasureWorker runs it: the end user's row, their facts, then their memories.
    const erasing = await HeldTransaction.begin();
    let removing: Promise<void> | undefined;
    try {
      await erasing.run('SELECT 1 FROM end_users WHERE id = $1 FOR UPDATE', [endUserId]);
      await erasing.run('DELETE FROM end_user_facts WHERE end_user_id = $1', [endUserId]);
      // The deletion's cascade takes the memory, then waits for its fact.
      removing = service.remove(apiKeyCaller(organizationId), clone.id);
      await erasing.untilWaitedOn();
      // The erasure now waits for what the deletion holds: a cycle. Before, the deletion's
      // rollback was its 500; now it runs again, after the erasure.
      try {
        await erasing.run('DELETE FROM memory_terms WHERE end_user_id = $1', [endUserId]);
        await erasing.run('DELETE FROM memories WHERE end_user_id = $1', [endUserId]);
      } catch (error) {
        if (!isDeadlock(error)) throw error;
        await erasing.end();
        await removing;
        return 'erasure rolled back';
      }
      await erasing.run('DELETE FROM end_users WHERE id = $1', [endUserId]);
      await erasing.commit();
      await removing;
    } finally {
      await erasing.end();
      // Never left running past the spec (its connection ended under it at the module's close).
      await removing?.catch(() => undefined);
    }
    await expectAppError(service.get(organizationId, clone.id), 'not_found');
    return 'deletion rolled back';
  }
});
