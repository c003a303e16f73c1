import { randomUUID } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ApiKeyCaller } from '../src/common/auth/caller';
import { EndUsersService } from '../src/end-users/end-users.service';
import { KnowledgeService } from '../src/knowledge/knowledge.service';
import { FactsService } from '../src/memory/facts.service';
import { MemoriesService } from '../src/memory/memories.service';
import { QUERIES_DIR } from '../src/queries/statements';
import { RespondService } from '../src/respond/respond.service';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { section, StatementRecorder } from './support/statement-recorder';
import { createTestApp, type TestApp } from './support/test-app';

/** Set by `npm run sql:generate`: the spec writes the files instead of comparing with them. */
const WRITE = process.env.SQL_SNAPSHOTS === 'write';

/**
 * What decides the statements' text, at the defaults whatever the environment: the budgets and
 * limits are bound into it, and embeddings add the ranking by meaning. No Redis: a cache filled
 * before its instance has subscribed would be emptied, and a warm reply's reads would vary.
 */
const SETTINGS = {
  RESPONSE_ENGINE: 'local',
  ENGINE_HISTORY_MESSAGES: '20',
  MEMORY_RECALL_LIMIT: '8',
  MEMORY_RECALL_TIMEOUT_MS: '150',
  KNOWLEDGE_RECALL_LIMIT: '4',
  EMBEDDINGS_MODEL: undefined,
  REDIS_URL: undefined,
};

/**
 * Every statement the hot operations send, recorded from the driver while the service does them
 * (test/support/statement-recorder.ts) and checked in under src/queries, one file a service: a
 * reviewer sees what an operation costs, and this spec fails when a change adds, removes or
 * rewrites one of its statements. Each operation runs on fresh rows, in a fixed order, so that
 * what the service's caches hold is the same at every run.
 */
describe('the statements each operation sends (src/queries/*.service.sql)', () => {
  let t: TestApp;
  const recorder = new StatementRecorder();

  beforeAll(async () => {
    t = await createTestApp({ env: SETTINGS });
    recorder.install();
  });

  afterAll(async () => {
    recorder.uninstall();
    await t?.close();
  });

  /** A fresh organization, a personality of it, and the caller its API key stands for. */
  async function tenant() {
    const { organizationId, auth } = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, auth, 'sage-mentor');
    const caller: ApiKeyCaller = {
      kind: 'api_key',
      organizationId,
      apiKeyId: randomUUID(),
      scopes: ['read_write'],
    };
    return { organizationId, auth, personalityId, caller };
  }

  /** The section of one operation: its title and the statements `work` sent (some, surely). */
  async function operation(title: string, work: () => Promise<unknown>): Promise<string> {
    const { statements } = await recorder.record(work);
    expect(statements.length).toBeGreaterThan(0);
    return section(title, statements);
  }

  /** A completed reply, its statements recorded. */
  function reply(
    caller: ApiKeyCaller,
    body: { personality_id: string; user_id: string; message: string },
  ) {
    const replies = t.app.get(RespondService);
    return async () => {
      const answer = await replies.respond(caller, body, { signal: new AbortController().signal });
      expect(answer.status).toBe('completed');
    };
  }

  const FILES: Record<string, () => Promise<string[]>> = {
    'respond.service.sql': async () => {
      // The organization's first reply: the caches (safety settings, budgets, documents) cold.
      const first = await tenant();
      const conversation = { personality_id: first.personalityId, user_id: uniqueUserId() };
      const sections = [
        await operation(
          "an organization's first reply, to an end user met for the first time",
          reply(first.caller, { ...conversation, message: 'I started a new job today' }),
        ),
        await operation(
          'a later reply to the same end user (memories to recall, caches warm)',
          reply(first.caller, { ...conversation, message: 'The new job is hard' }),
        ),
      ];
      // A personality drawing on a document: its passages are read and cited.
      const second = await tenant();
      await t.app.get(KnowledgeService).create(second.organizationId, {
        title: 'Opening hours',
        content: 'We open at nine on weekdays and ten on Sundays.',
      });
      const reader = { personality_id: second.personalityId, user_id: uniqueUserId() };
      await reply(second.caller, { ...reader, message: 'Hello there' })();
      sections.push(
        await operation(
          'a reply whose personality draws on documents (caches warm)',
          reply(second.caller, { ...reader, message: 'When do you open on Sundays?' }),
        ),
      );
      return sections;
    },

    'end-users.service.sql': async () => {
      const { organizationId } = await tenant();
      const endUsers = t.app.get(EndUsersService);
      const userId = uniqueUserId();
      return [
        await operation('create-or-get: a new end user', () =>
          endUsers.ensure(organizationId, userId, { plan: 'gold' }),
        ),
        await operation('create-or-get: an existing end user', () =>
          endUsers.ensure(organizationId, userId),
        ),
        await operation('list, a page after a cursor', () =>
          endUsers.list(organizationId, 10, userId),
        ),
      ];
    },

    'memories.service.sql': async () => {
      const { organizationId, personalityId, caller } = await tenant();
      const userId = uniqueUserId();
      const conversation = { personality_id: personalityId, user_id: userId };
      await reply(caller, { ...conversation, message: 'We spent two weeks in Crete' })();
      await reply(caller, { ...conversation, message: 'My sister Clara plays the cello' })();
      const memories = t.app.get(MemoriesService);
      const page = await memories.list(organizationId, userId, { limit: 2 });
      return [
        await operation('list, the first page', () =>
          memories.list(organizationId, userId, { limit: 2 }),
        ),
        await operation('list, a page after a cursor, of one personality', () =>
          memories.list(organizationId, userId, {
            limit: 2,
            personalityId,
            startingAfter: page.data[1].id,
          }),
        ),
        await operation('search by words', () =>
          memories.search(organizationId, userId, { q: 'Crete holiday', limit: 10 }),
        ),
        await operation('forget one', () =>
          memories.forget(organizationId, userId, page.data[0].id),
        ),
      ];
    },

    'facts.service.sql': async () => {
      const { organizationId, personalityId, caller } = await tenant();
      const userId = uniqueUserId();
      await reply(caller, { personality_id: personalityId, user_id: userId, message: 'Hi' })();
      const facts = t.app.get(FactsService);
      const { fact } = await facts.create(organizationId, userId, 'Likes green tea');
      return [
        await operation('create', () => facts.create(organizationId, userId, 'Lives in Lyon')),
        await operation('create: one the end user holds already', () =>
          facts.create(organizationId, userId, 'likes GREEN tea'),
        ),
        await operation('list', () => facts.list(organizationId, userId, { limit: 10 })),
        await operation('update', () =>
          facts.update(organizationId, userId, fact.id, 'Likes black tea'),
        ),
        await operation('delete', () => facts.delete(organizationId, userId, fact.id)),
      ];
    },

    'knowledge.service.sql': async () => {
      const { organizationId, personalityId } = await tenant();
      const knowledge = t.app.get(KnowledgeService);
      const content = 'We open at nine on weekdays.\n\nParcels leave Leeds every afternoon.';
      const created = await knowledge.create(organizationId, { title: 'Shop', content });
      return [
        await operation('upload, attached to one personality', () =>
          knowledge.create(organizationId, {
            title: 'Returns',
            content: 'Returns are free within thirty days.',
            personality_ids: [personalityId],
          }),
        ),
        await operation('search by words', () =>
          knowledge.search(organizationId, { q: 'When do parcels leave?', limit: 4 }),
        ),
        await operation('new content, chunked again', () =>
          knowledge.update(organizationId, created.id, { content: `${content} Sundays too.` }),
        ),
        await operation('delete', () => knowledge.remove(organizationId, created.id)),
      ];
    },
  };

  it.each(Object.keys(FILES))('%s', async (file) => {
    const content = `-- AUTOGENERATED by npm run sql:generate; do not edit.\n\n${(await FILES[file]()).join('\n\n')}\n`;
    const path = join(QUERIES_DIR, file);
    if (WRITE) {
      writeFileSync(path, content);
      return;
    }
    const checkedIn = readFileSync(path, 'utf8').split('\n');
    const sent = content.split('\n');
    const line = sent.findIndex((text, index) => text !== checkedIn[index]);
    if (line >= 0 || checkedIn.length !== sent.length) {
      const at = line >= 0 ? line : Math.min(sent.length, checkedIn.length);
      throw new Error(
        `src/queries/${file} differs from the statements sent at line ${at + 1}: ` +
          `checked in ${JSON.stringify(checkedIn[at])}, sent ${JSON.stringify(sent[at])}. ` +
          'Run npm run sql:generate and review the difference.',
      );
    }
  });
});
