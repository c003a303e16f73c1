import { createHash, randomUUID } from 'node:crypto';
import type { ApiKeyCaller } from '../src/common/auth/caller';
import { Database } from '../src/database/database';
import { EndUsersService } from '../src/end-users/end-users.service';
import { type IdempotencyClaim, IdempotencyService } from '../src/idempotency/idempotency.service';
import { KnowledgeService } from '../src/knowledge/knowledge.service';
import { FactsService } from '../src/memory/facts.service';
import { MemoriesService } from '../src/memory/memories.service';
import { RespondService } from '../src/respond/respond.service';
import { uniqueUserId } from './support/data-plane';
import { describeRecordedStatements, type RecordedFiles } from './support/recorded-statements';
import type { TestApp } from './support/test-app';

/** A completed reply, its statements recorded. */
function reply(
  t: TestApp,
  caller: ApiKeyCaller,
  body: { personality_id: string; user_id: string; message: string },
) {
  const replies = t.app.get(RespondService);
  return async () => {
    const answer = await replies.reply(await replies.prepare(caller, body), {
      signal: new AbortController().signal,
    });
    expect(answer.status).toBe('completed');
  };
}

const FILES: RecordedFiles = {
  'respond.service.sql': async ({ t, tenant, operation }) => {
    // The organization's first reply: the caches (safety settings, budgets, documents) cold.
    const first = await tenant();
    const conversation = { personality_id: first.personalityId, user_id: uniqueUserId() };
    const sections = [
      await operation(
        "an organization's first reply, to an end user met for the first time",
        reply(t, first.caller, { ...conversation, message: 'I started a new job today' }),
      ),
      await operation(
        'a later reply to the same end user (memories to recall, caches warm)',
        reply(t, first.caller, { ...conversation, message: 'The new job is hard' }),
      ),
    ];
    // A personality drawing on a document: its passages are read and cited.
    const second = await tenant();
    await t.app.get(KnowledgeService).create(second.organizationId, {
      title: 'Opening hours',
      content: 'We open at nine on weekdays and ten on Sundays.',
    });
    const reader = { personality_id: second.personalityId, user_id: uniqueUserId() };
    await reply(t, second.caller, { ...reader, message: 'Hello there' })();
    sections.push(
      await operation(
        'a reply whose personality draws on documents (caches warm)',
        reply(t, second.caller, { ...reader, message: 'When do you open on Sundays?' }),
      ),
    );
    return sections;
  },

  'end-users.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, caller } = await tenant();
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
      await operation('delete: marked for erasure after the grace period', () =>
        endUsers.scheduleErasure(caller, userId),
      ),
    ];
  },

  'idempotency.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId } = await tenant();
    const keys = t.app.get(IdempotencyService);
    const database = t.app.get(Database);
    const ref = (key: string) => ({
      scopeType: 'organization' as const,
      scopeId: organizationId,
      key,
    });
    const request = createHash('sha256').update('POST /v1/end-users {}').digest();
    const begin = (key: string, hash = request) => keys.begin(ref(key), randomUUID(), hash, []);
    const claimed = async (key: string) => {
      const begun = await begin(key);
      if (begun.kind !== 'claimed') throw new Error(`${key} was not claimed`);
      return begun.claim;
    };
    const answer = { id: 'e1', created: true };
    let first: IdempotencyClaim | undefined;
    const sections = [
      await operation("a key's first request: claimed", async () => {
        first = await claimed('first');
      }),
      await operation('its answer stored', () => keys.settleAnswer(first!, 201, answer)),
      await operation('the same request again: its stored answer replayed', () => begin('first')),
      await operation('another request under the key: refused (422)', () =>
        begin('first', createHash('sha256').update('another body').digest()).catch(
          (error: unknown) => error,
        ),
      ),
    ];
    const failing = await claimed('failing');
    sections.push(
      await operation('a request that failed: its key given up', () =>
        keys.settleError(failing, 503, 'database_timeout', { error: {} }),
      ),
    );
    const inTransaction = await claimed('in-transaction');
    sections.push(
      await operation("an answer stored in the work's own transaction", () =>
        keys.runWithin(inTransaction, () =>
          database.transaction((manager) => keys.recordInTransaction(manager, 201, answer)),
        ),
      ),
    );
    // Its lease is no longer renewed, as the interceptor ends a request recorded so.
    await keys.settleAnswer(inTransaction, 201, answer);
    return sections;
  },

  'memories.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId, caller } = await tenant();
    const userId = uniqueUserId();
    const conversation = { personality_id: personalityId, user_id: userId };
    await reply(t, caller, { ...conversation, message: 'We spent two weeks in Crete' })();
    await reply(t, caller, { ...conversation, message: 'My sister Clara plays the cello' })();
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
      await operation('forget one', () => memories.forget(organizationId, userId, page.data[0].id)),
    ];
  },

  'facts.service.sql': async ({ t, tenant, operation }) => {
    const { organizationId, personalityId, caller } = await tenant();
    const userId = uniqueUserId();
    await reply(t, caller, { personality_id: personalityId, user_id: userId, message: 'Hi' })();
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

  'knowledge.service.sql': async ({ t, tenant, operation }) => {
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

/**
 * The hot operations: a reply, and the memory, end-user and knowledge calls around it, and the
 * Idempotency-Key any of them may carry.
 */
describeRecordedStatements(
  'the statements each operation sends (src/queries/*.service.sql)',
  FILES,
);
