import type { TestingModule } from '@nestjs/testing';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { lastValueFrom, throwError } from 'rxjs';
import type { ApiKeyCaller } from '../../src/common/auth/caller';
import { AppError } from '../../src/common/errors/app-error';
import { StreamsModule } from '../../src/common/streams/streams.module';
import type { SpooledDocument } from '../../src/common/http/spooled-document';
import { Database } from '../../src/database/database';
import { sql, withEntries } from '../../src/database/sql';
import { CHUNK_BYTES, ExportsService } from '../../src/exports/exports.service';
import { ExportsModule } from '../../src/exports/exports.module';
import {
  ImportSlotInterceptor,
  ImportSlots,
  SLOW_UPLOAD_BYTES_PER_SECOND,
  SLOW_UPLOAD_GRACE_MS,
} from '../../src/exports/import-slots';
import { ImportService } from '../../src/exports/import.service';
import { readPmfV1Schema } from '../../src/exports/pmf-v1';
import { factKey } from '../../src/memory/dto/fact.dto';
import { factsInsertStep } from '../../src/memory/facts.step';
import { memoriesInsertStep, type NewMemory } from '../../src/memory/memories.step';
import type { MemorySafety } from '../../src/safety/safety-categories';
import { expectAppError } from '../support/assertions';
import { asCaller } from '../support/execution-context';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { spoolBody } from '../support/spool';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- documents are read loosely
type Json = Record<string, any>;

const FACTS_LIMIT = 5;
const IMPORTS_IN_FLIGHT = 2;
const IMPORT_MAX_BYTES = 256 * 1_024;

/** The environment the module's configuration is read from, set only while it is compiled. */
const ENV = {
  MEMORY_FACTS_LIMIT: String(FACTS_LIMIT),
  IMPORTS_IN_FLIGHT: String(IMPORTS_IN_FLIGHT),
  IMPORT_MAX_BYTES: String(IMPORT_MAX_BYTES),
};

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats(ajv);
const validatePmf = ajv.compile(readPmfV1Schema());

/** A catalog entry shipped with the service, as a document's personality (replies included). */
const SAGE = (
  JSON.parse(
    readFileSync(join(__dirname, '../../src/personalities/data/catalog.json'), 'utf8'),
  ) as Json[]
).find((entry) => entry.slug === 'sage-mentor')!;

/** The documented keys of each part of a PMF v1 document (docs/pmf-v1.md). */
const END_USER_KEYS = ['created_at', 'metadata', 'status', 'updated_at', 'user_id'];
const MEMORY_KEYS = [
  'content',
  'created_at',
  'emotion',
  'id',
  'personality_id',
  'role',
  'safety',
  'tool_calls',
  'vocabulary_version',
];
const FACT_KEYS = ['content', 'created_at', 'id', 'memory_id', 'source', 'updated_at'];

const NONE: MemorySafety = { flagged: false, categories: [], action: 'none' };

/**
 * The exports module alone on a real PostgreSQL, without HTTP ("medium" spec): the PMF v1 export
 * (ExportsService: what a document holds and never holds, whose it is, how it streams) and the
 * import (ImportService: checked whole then written all or nothing, in the caller's organization
 * only; ImportSlots: IMPORTS_IN_FLIGHT), called directly. Documents reach the import as the route
 * hands them over: spooled by spoolDocument. docs/pmf-v1.md; contract §9, §20, §29.
 */
describe('Exports module (real database)', () => {
  let moduleRef: TestingModule;
  let exportsService: ExportsService;
  let imports: ImportService;
  let slots: ImportSlots;
  let database: Database;
  let factory: Factory;
  const spooled: SpooledDocument[] = [];

  beforeAll(async () => {
    // StreamSlots (the export route's budget) is AppModule's global module.
    moduleRef = await moduleAlone([StreamsModule, ExportsModule], ENV);
    exportsService = moduleRef.get(ExportsService);
    imports = moduleRef.get(ImportService);
    slots = moduleRef.get(ImportSlots);
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterEach(async () => {
    await Promise.all(spooled.splice(0).map((document) => document.close()));
  });
  afterAll(() => moduleRef?.close());

  const caller = (organizationId: string): ApiKeyCaller => ({
    kind: 'api_key',
    organizationId,
    scopes: ['read_write'],
    apiKeyId: randomUUID(),
  });

  /** A body as the route receives it, spooled; closed after the test. */
  async function spool(body: unknown, limit = IMPORT_MAX_BYTES): Promise<SpooledDocument> {
    const document = await spoolBody(body, limit);
    spooled.push(document);
    return document;
  }

  const importDocument = async (organizationId: string, document: Json) =>
    imports.import(caller(organizationId), await spool(document));

  /** The export, read to its end: its chunks and the document they make. */
  async function exportOf(organizationId: string, userId: string) {
    const chunks: string[] = [];
    for await (const chunk of await exportsService.exportDocument(organizationId, userId)) {
      chunks.push(chunk);
    }
    const document = JSON.parse(chunks.join('')) as Json;
    expect(validatePmf(document) ? [] : validatePmf.errors).toEqual([]);
    return { chunks, document };
  }

  /** A personality of the organization, with replies as the catalog's (a valid export). */
  async function personality(organizationId: string, name = 'Companion'): Promise<string> {
    const id = await factory.personality(organizationId, name);
    await database.rows(
      sql`UPDATE personalities SET replies = ${JSON.stringify(SAGE.replies)}::jsonb WHERE id = ${id}`,
    );
    return id;
  }

  /** Memories of one end user, in the order given, a second apart; answers their ids. */
  async function remember(
    organizationId: string,
    endUserId: string,
    personalityId: string,
    messages: Array<{ content: string; safety?: MemorySafety | null }>,
    start = Date.parse('2031-03-01T10:00:00Z'),
  ): Promise<string[]> {
    const memories: NewMemory[] = messages.map(({ content, safety }, index) => ({
      organizationId,
      endUserId,
      personalityId,
      role: index % 2 === 0 ? 'user' : 'personality',
      content,
      emotion: index % 2 === 0 ? 'joy' : null,
      intensity: index % 2 === 0 ? 0.5 : null,
      vocabularyVersion: index % 2 === 0 ? '2.0.0' : null,
      createdAt: new Date(start + index * 1_000),
      safety: safety === undefined ? NONE : safety,
    }));
    const inserted = memoriesInsertStep(memories);
    const rows = await database.rows<{ id: string }>(
      withEntries([inserted], sql`SELECT id FROM ${inserted.ref} ORDER BY id`),
    );
    return rows.map((row) => row.id);
  }

  /** Facts of one end user, written as an import writes them. */
  async function know(
    organizationId: string,
    endUserId: string,
    facts: Array<{ content: string; memoryId: string | null; at: string }>,
  ): Promise<void> {
    await database.rows(
      withEntries(
        [
          factsInsertStep(
            { organizationId, endUserId },
            facts.map(({ content, memoryId, at }) => ({
              content,
              key: factKey(content),
              source: memoryId === null ? 'api' : 'engine',
              memoryId,
              createdAt: new Date(at),
              updatedAt: new Date(at),
            })),
          ),
        ],
        sql`SELECT 1`,
      ),
    );
  }

  /** A small valid document: a personality, two messages and a fact learned from the first. */
  function documentOf(userId: string, personality: Json = { ...sage(), id: randomUUID() }): Json {
    const iso = new Date(Date.now() - 60_000).toISOString();
    return {
      format: 'pmf',
      version: 1,
      exported_at: iso,
      end_user: {
        user_id: userId,
        metadata: { plan: 'pro' },
        status: 'deleting',
        created_at: '2025-01-02T03:04:05.678Z',
        updated_at: iso,
      },
      personalities: [personality],
      relationships: [
        { personality_id: personality.id, month: iso.slice(0, 7), first_active_at: iso },
      ],
      memories: [
        {
          id: '11',
          personality_id: personality.id,
          role: 'user',
          content: 'I want to kill myself tonight',
          emotion: { name: 'sadness', intensity: 0.9 },
          vocabulary_version: '2.0.0',
          created_at: '2025-05-01T10:00:01.000Z',
          // The document's verdict is never taken (contract §29).
          safety: NONE,
        },
        {
          id: '7',
          personality_id: personality.id,
          role: 'personality',
          content: 'I am here with you.',
          emotion: null,
          vocabulary_version: null,
          created_at: '2025-05-01T10:00:00.000Z',
          safety: { flagged: true, categories: ['violence'], action: 'blocked' },
        },
      ],
      facts: [
        {
          id: randomUUID(),
          content: '  Feels   low at night ',
          source: 'engine',
          memory_id: '11',
          created_at: '2025-05-01T10:00:02.000Z',
          updated_at: '2025-05-02T10:00:02.000Z',
        },
        {
          id: randomUUID(),
          content: 'Prefers tea',
          source: 'api',
          memory_id: null,
          created_at: '2025-05-03T10:00:02.000Z',
          updated_at: '2025-05-03T10:00:02.000Z',
        },
      ],
    };
  }

  /** The catalog entry as a document's personality (without its id). */
  function sage(): Json {
    const { slug, version, ...fields } = SAGE;
    return { source_slug: slug, source_version: version, language: 'en', ...fields };
  }

  const WEBHOOK_SECRET = 'whsec_never-in-a-document';

  /** An enabled webhook endpoint of the organization for every event an import writes. */
  async function subscribe(organizationId: string): Promise<void> {
    await database.rows(
      sql`INSERT INTO webhook_endpoints (organization_id, url, events, secret)
          VALUES (${organizationId}, 'https://hooks.example.com/in',
                  ARRAY['end_user.created', 'personality.created'], ${WEBHOOK_SECRET})`,
    );
  }

  /** What an organization holds: the rows an import may write. */
  async function holdings(organizationId: string) {
    const [row] = await database.rows<Record<string, number>>(
      sql`SELECT (SELECT count(*) FROM end_users WHERE organization_id = ${organizationId})::int AS end_users,
                 (SELECT count(*) FROM personalities WHERE organization_id = ${organizationId})::int AS personalities,
                 (SELECT count(*) FROM memories WHERE organization_id = ${organizationId})::int AS memories,
                 (SELECT count(*) FROM end_user_facts WHERE organization_id = ${organizationId})::int AS facts,
                 (SELECT count(*) FROM relationship_months WHERE organization_id = ${organizationId})::int AS relationships,
                 (SELECT count(*) FROM webhook_events WHERE organization_id = ${organizationId})::int AS events`,
    );
    return row;
  }

  describe('the export (ExportsService)', () => {
    it('holds the end user’s memories with their verdicts, facts and personalities; nothing of another end user; never embeddings or internal columns', async () => {
      const organizationId = await factory.organization();
      await subscribe(organizationId);
      const companion = await personality(organizationId, 'Companion');
      const unused = await personality(organizationId, 'Never talked to');
      const ada = await factory.endUser(organizationId, 'ada');
      const bob = await factory.endUser(organizationId, 'bob');
      const flagged: MemorySafety = { flagged: true, categories: ['self_harm'], action: 'flagged' };
      const ids = await remember(organizationId, ada, companion, [
        { content: 'I feel hopeless', safety: flagged },
        { content: 'I am here for you' },
        { content: 'Written before safety was checked', safety: null },
      ]);
      await know(organizationId, ada, [
        { content: 'Feels hopeless at times', memoryId: ids[0], at: '2031-03-02T00:00:00.000Z' },
        { content: 'Likes tea', memoryId: null, at: '2031-03-01T00:00:00.000Z' },
      ]);
      // Another end user of the same organization and personality, and one of the same user_id
      // in another organization: neither is ada's.
      const bobIds = await remember(organizationId, bob, companion, [{ content: 'Bob’s secret' }]);
      await know(organizationId, bob, [
        { content: 'Bob’s fact', memoryId: bobIds[0], at: '2031-03-01T00:00:00.000Z' },
      ]);
      const elsewhere = await factory.organization();
      const theirs = await personality(elsewhere, 'Theirs');
      await remember(elsewhere, await factory.endUser(elsewhere, 'ada'), theirs, [
        { content: 'The other ada’s secret' },
      ]);
      // Derived data stored beside ada's memories: embeddings (never exported, contract §27).
      await database.rows(
        sql`INSERT INTO memory_embeddings (memory_id, end_user_id, personality_id, model, embedding)
            SELECT id, end_user_id, personality_id, 'leaky-embedding-model',
                   ARRAY[0.123456789, -0.987654321, 0.5]::real[]
              FROM memories WHERE end_user_id = ${ada}`,
      );

      const { document } = await exportOf(organizationId, 'ada');

      expect(document).toMatchObject({ format: 'pmf', version: 1 });
      expect(Object.keys(document.end_user).sort()).toEqual(END_USER_KEYS);
      expect(document.end_user).toMatchObject({ user_id: 'ada', metadata: {}, status: 'active' });
      // The personalities ada talked to, not every personality of the organization.
      expect(document.personalities.map((p: Json) => p.id)).toEqual([companion]);
      expect(document.personalities.map((p: Json) => p.id)).not.toContain(unused);
      expect(document.memories.map((m: Json) => Object.keys(m).sort())).toEqual(
        ids.map(() => MEMORY_KEYS),
      );
      expect(
        document.memories.map((m: Json) => ({
          id: m.id,
          content: m.content,
          role: m.role,
          emotion: m.emotion,
          safety: m.safety,
        })),
      ).toEqual([
        {
          id: ids[0],
          content: 'I feel hopeless',
          role: 'user',
          emotion: { name: 'joy', intensity: 0.5 },
          safety: flagged,
        },
        {
          id: ids[1],
          content: 'I am here for you',
          role: 'personality',
          emotion: null,
          safety: NONE,
        },
        {
          id: ids[2],
          content: 'Written before safety was checked',
          role: 'user',
          emotion: { name: 'joy', intensity: 0.5 },
          safety: null,
        },
      ]);
      // Oldest first; a learned fact names its message by the document's memory id.
      expect(document.facts.map((f: Json) => Object.keys(f).sort())).toEqual([
        FACT_KEYS,
        FACT_KEYS,
      ]);
      expect(
        document.facts.map((f: Json) => ({
          content: f.content,
          source: f.source,
          memory_id: f.memory_id,
        })),
      ).toEqual([
        { content: 'Likes tea', source: 'api', memory_id: null },
        { content: 'Feels hopeless at times', source: 'engine', memory_id: ids[0] },
      ]);
      const text = JSON.stringify(document);
      for (const foreign of ['Bob’s', 'other ada', 'leaky-embedding-model', '0.12345', '0.98765'])
        expect(text).not.toContain(foreign);
      for (const internal of [
        organizationId,
        ada,
        elsewhere,
        WEBHOOK_SECRET,
        '"search"',
        '"sketch"',
      ])
        expect(text).not.toContain(internal);
    });

    it('refuses an unknown end user and another organization’s with 404 before anything is streamed', async () => {
      const mine = await factory.organization();
      const theirs = await factory.organization();
      const theirPersonality = await personality(theirs);
      await remember(theirs, await factory.endUser(theirs, 'cy'), theirPersonality, [
        { content: 'Only theirs' },
      ]);
      // The promise itself fails: no head of a document was produced for the client.
      await expectAppError(exportsService.exportDocument(mine, 'cy'), 'not_found');
      await expectAppError(exportsService.exportDocument(mine, 'nobody'), 'not_found');
      await expectAppError(exportsService.modelDocument(mine, 'cy'), 'not_found');
      const { document } = await exportOf(theirs, 'cy');
      expect(document.memories.map((m: Json) => m.content)).toEqual(['Only theirs']);
    });

    it('names only personalities of its own organization, even where a row names another’s (review)', async () => {
      // No writer stores another organization's personality for an end user (each checks it
      // first), and the database does not forbid it: the export's read does not rely on that.
      const mine = await factory.organization();
      const theirs = await factory.organization();
      const own = await personality(mine, 'Own');
      const theirPersonality = await personality(theirs, 'Theirs');
      await remember(mine, await factory.endUser(mine, 'di'), own, [{ content: 'Mine' }]);
      await database.rows(
        sql`UPDATE memories SET personality_id = ${theirPersonality}
             WHERE organization_id = ${mine}`,
      );
      const names = async () => {
        const chunks: string[] = [];
        for await (const chunk of await exportsService.exportDocument(mine, 'di')) {
          chunks.push(chunk);
        }
        return (JSON.parse(chunks.join('')) as Json).personalities.map((p: Json) => p.name);
      };
      expect(await names()).not.toContain('Theirs');
    });

    it('streams every memory across pages, in chunks of about CHUNK_BYTES, bounded by its start', async () => {
      const organizationId = await factory.organization();
      const companion = await personality(organizationId);
      const endUserId = await factory.endUser(organizationId, 'di');
      // More than a page of 250 rows, and several chunks of text.
      const contents = Array.from({ length: 520 }, (_, i) => `Message ${i} ${'x'.repeat(300)}`);
      const ids = await remember(
        organizationId,
        endUserId,
        companion,
        contents.map((content) => ({ content })),
      );

      const stream = await exportsService.exportDocument(organizationId, 'di');
      // Written after the export started: a message, and a fact learned from it (later document).
      const [late] = await remember(organizationId, endUserId, companion, [
        { content: 'Said while the export ran' },
      ]);
      await know(organizationId, endUserId, [
        { content: 'Learned late', memoryId: late, at: '2031-04-01T00:00:00.000Z' },
        { content: 'Written by the API', memoryId: null, at: '2031-04-01T00:00:00.000Z' },
      ]);
      const chunks: string[] = [];
      for await (const chunk of stream) chunks.push(chunk);
      const document = JSON.parse(chunks.join('')) as Json;

      expect(document.memories.map((m: Json) => m.id)).toEqual(ids);
      expect(document.memories.map((m: Json) => m.content)).toEqual(contents);
      expect(document.facts.map((f: Json) => f.content)).toEqual(['Written by the API']);
      expect(chunks.length).toBeGreaterThan(2);
      for (const chunk of chunks.slice(0, -1)) {
        expect(chunk.length).toBeGreaterThanOrEqual(CHUNK_BYTES);
        expect(chunk.length).toBeLessThan(CHUNK_BYTES + 1_024);
      }
      // The next export holds what came later.
      const { document: next } = await exportOf(organizationId, 'di');
      expect(next.memories).toHaveLength(contents.length + 1);
      expect(next.facts.map((f: Json) => f.content).sort()).toEqual([
        'Learned late',
        'Written by the API',
      ]);
    });
    it('cuts a document whose end user was erased while it was read, rather than close it as whole', async () => {
      const organizationId = await factory.organization();
      const companion = await personality(organizationId);
      const endUserId = await factory.endUser(organizationId, 'ev');
      const contents = Array.from({ length: 300 }, (_, i) => `Message ${i} ${'x'.repeat(300)}`);
      await remember(
        organizationId,
        endUserId,
        companion,
        contents.map((content) => ({ content })),
      );
      for (const document of ['exportDocument', 'modelDocument'] as const) {
        const stream = (await exportsService[document](organizationId, 'ev'))[
          Symbol.asyncIterator
        ]();
        // The first chunk is read; then the erasure commits (all of it, the row last).
        expect((await stream.next()).done).toBe(false);
        await database.transaction(async (manager) => {
          await database.count(sql`DELETE FROM memories WHERE end_user_id = ${endUserId}`, {
            manager,
          });
          await database.count(sql`DELETE FROM end_users WHERE id = ${endUserId}`, { manager });
        });
        await expectAppError(
          (async () => {
            while (!(await stream.next()).done);
          })(),
          'not_found',
        );
        // Written again for the next document.
        await database.count(
          sql`INSERT INTO end_users (id, organization_id, user_id)
              VALUES (${endUserId}, ${organizationId}, 'ev')`,
        );
        await remember(
          organizationId,
          endUserId,
          companion,
          contents.map((content) => ({ content })),
        );
      }
    });
  });

  describe('the import (ImportService)', () => {
    it('writes the end user, the personality, the memories in order with this service’s verdicts, and the facts; no relationship', async () => {
      const organizationId = await factory.organization();
      await subscribe(organizationId);
      const document = documentOf('eve');
      const before = Date.now();

      const result = await importDocument(organizationId, document);

      expect(result).toEqual({
        user_id: 'eve',
        personalities_created: 1,
        memories_imported: 2,
        facts_imported: 2,
      });
      const [endUser] = await database.rows<Json>(
        sql`SELECT id, metadata, status, created_at, updated_at FROM end_users
             WHERE organization_id = ${organizationId} AND user_id = 'eve'`,
      );
      // The document's metadata and created_at; active, updated now, whatever the document says.
      expect(endUser).toMatchObject({ metadata: { plan: 'pro' }, status: 'active' });
      expect((endUser.created_at as Date).toISOString()).toBe('2025-01-02T03:04:05.678Z');
      expect((endUser.updated_at as Date).getTime()).toBeGreaterThanOrEqual(before - 1_000);
      const personalities = await database.rows<{ id: string; name: string }>(
        sql`SELECT id, name FROM personalities WHERE organization_id = ${organizationId}`,
      );
      expect(personalities).toEqual([{ id: expect.any(String), name: SAGE.name }]);
      expect(personalities[0].id).not.toBe(document.personalities[0].id);

      const { document: exported } = await exportOf(organizationId, 'eve');
      // In the document's order (not by time), under new increasing ids.
      expect(exported.memories.map((m: Json) => [m.role, m.content, m.created_at])).toEqual(
        document.memories.map((m: Json) => [m.role, m.content, m.created_at]),
      );
      expect(exported.memories.map((m: Json) => m.personality_id)).toEqual([
        personalities[0].id,
        personalities[0].id,
      ]);
      expect(Number(exported.memories[0].id)).toBeLessThan(Number(exported.memories[1].id));
      expect(exported.memories.map((m: Json) => m.emotion)).toEqual([
        { name: 'sadness', intensity: 0.9 },
        null,
      ]);
      // The classifier's verdict, never the document's; nothing blocked at import time.
      expect(exported.memories.map((m: Json) => m.safety)).toEqual([
        { flagged: true, categories: ['self_harm'], action: 'flagged' },
        NONE,
      ]);
      expect(
        exported.facts.map((f: Json) => [f.content, f.source, f.memory_id, f.updated_at]),
      ).toEqual([
        ['Feels low at night', 'engine', exported.memories[0].id, '2025-05-02T10:00:02.000Z'],
        ['Prefers tea', 'api', null, '2025-05-03T10:00:02.000Z'],
      ]);
      expect(exported.relationships).toEqual([]);
      // One end_user.created event, one personality.created; no relationship counted.
      const events = await database.rows<{ type: string }>(
        sql`SELECT type FROM webhook_events WHERE organization_id = ${organizationId} ORDER BY type`,
      );
      expect(events.map((event) => event.type)).toEqual([
        'end_user.created',
        'personality.created',
      ]);
      expect(await holdings(organizationId)).toMatchObject({ relationships: 0 });
    });

    it('writes nothing when any part is refused: by the checks (late in the document) or during the write', async () => {
      const organizationId = await factory.organization();
      await subscribe(organizationId);
      const empty = await holdings(organizationId);

      // Checked whole before the write: the last fact names no memory of the document.
      const checked = documentOf('fay');
      checked.facts[1].memory_id = '999';
      const refused: unknown = await importDocument(organizationId, checked).catch((e) => e);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).code).toBe('validation_failed');
      expect((refused as AppError).details).toEqual([
        { field: '/facts/1/memory_id', problem: 'names no memory of the document' },
      ]);
      expect(await holdings(organizationId)).toEqual(empty);

      // Refused by the write itself, after the end user was inserted: a new personality without
      // replies whose source_slug no catalog entry has. The transaction takes the end user back.
      const { replies: _replies, ...withoutReplies } = sage();
      const written = documentOf('fay', {
        ...withoutReplies,
        id: randomUUID(),
        source_slug: 'no-such-catalog-entry',
      });
      const late: unknown = await importDocument(organizationId, written).catch((e) => e);
      expect((late as AppError).details).toEqual([
        { field: '/personalities/0/replies', problem: expect.stringContaining('catalog') },
      ]);
      expect(await holdings(organizationId)).toEqual(empty);

      // The same user_id is still free: nothing of the refusals was kept.
      await expect(importDocument(organizationId, documentOf('fay'))).resolves.toMatchObject({
        user_id: 'fay',
        memories_imported: 2,
      });
    });

    it('refuses a second import of the same document (end_user_exists) and keeps the first; of concurrent ones exactly one is written', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('gus');
      await importDocument(organizationId, document);
      const once = await holdings(organizationId);

      await expectAppError(importDocument(organizationId, document), 'end_user_exists');
      expect(await holdings(organizationId)).toEqual(once);

      // Under deletion: told so, with when the user_id frees up.
      await database.rows(
        sql`UPDATE end_users SET status = 'deleting', erase_after = now() + interval '30 seconds'
             WHERE organization_id = ${organizationId} AND user_id = 'gus'`,
      );
      await expectAppError(importDocument(organizationId, document), 'end_user_under_deletion');
      expect(await holdings(organizationId)).toEqual(once);

      // The unique constraint decides under concurrency, not a read before the insert.
      const racing = documentOf('hal');
      const documents = await Promise.all([1, 2, 3].map(() => spool(racing)));
      const results = await Promise.allSettled(
        documents.map((spooledDocument) => imports.import(caller(organizationId), spooledDocument)),
      );
      expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1);
      for (const result of results) {
        if (result.status === 'rejected') {
          expect((result.reason as AppError).code).toBe('end_user_exists');
        }
      }
      expect(await holdings(organizationId)).toMatchObject({
        end_users: once.end_users + 1,
        memories: once.memories + 2,
        facts: once.facts + 2,
      });
    });

    it('writes only into the caller’s organization: its own personality is used as it is, another’s is never touched', async () => {
      const a = await factory.organization();
      const b = await factory.organization();
      await subscribe(a);
      const aPersonality = await personality(a, 'A’s companion');
      // A document naming A's personality, with fields of its own.
      const document = documentOf('ida', { ...sage(), id: aPersonality, name: 'Renamed' });
      const aBefore = await holdings(a);

      const intoA = await importDocument(a, document);
      expect(intoA.personalities_created).toBe(0);
      const [{ name }] = await database.rows<{ name: string }>(
        sql`SELECT name FROM personalities WHERE id = ${aPersonality}`,
      );
      expect(name).toBe('A’s companion');
      const { document: inA } = await exportOf(a, 'ida');
      expect(inA.memories.map((m: Json) => m.personality_id)).toEqual([aPersonality, aPersonality]);
      const aAfter = await holdings(a);
      expect(aAfter).toMatchObject({
        end_users: aBefore.end_users + 1,
        personalities: aBefore.personalities,
        // end_user.created only: no personality was created.
        events: aBefore.events + 1,
      });

      // The same document into B: B's own copy of the personality, B's own end user.
      const intoB = await importDocument(b, document);
      expect(intoB).toMatchObject({ user_id: 'ida', personalities_created: 1 });
      const { document: inB } = await exportOf(b, 'ida');
      expect(inB.personalities).toHaveLength(1);
      expect(inB.personalities[0].id).not.toBe(aPersonality);
      expect(inB.personalities[0].name).toBe('Renamed');
      expect(await holdings(a)).toEqual(aAfter);
      expect(await holdings(b)).toMatchObject({
        end_users: 1,
        personalities: 1,
        memories: 2,
        facts: 2,
      });
    });
  });

  describe('the limits of an import', () => {
    /** An upload as the slots see it: `received` bytes so far, complete or not. */
    const upload = (received: () => number, complete = false) => ({
      received,
      complete: () => complete,
      abandon: jest.fn(),
    });
    const idle = () => upload(() => 0);

    it('gives a newcomer the slot of the slowest upload still arriving below the floor past the grace; a complete or fast one keeps its own', () => {
      const start = 1_000_000;
      let trickled = 0;
      const trickling = upload(() => trickled);
      const releaseTrickling = slots.take('org-a', trickling, start);
      const complete = upload(() => 0, true);
      const releaseComplete = slots.take('org-b', complete, start);
      // Within the grace, nothing is judged: the newcomer is refused.
      expect(() => slots.take('org-c', idle(), start + SLOW_UPLOAD_GRACE_MS - 1)).toThrow(AppError);
      // Past it, the trickling upload (a byte a second) gives its slot up, the complete one not.
      trickled = 6;
      const later = start + SLOW_UPLOAD_GRACE_MS + 1_000;
      const releaseNewcomer = slots.take('org-c', idle(), later);
      expect(trickling.abandon).toHaveBeenCalledTimes(1);
      expect(complete.abandon).not.toHaveBeenCalled();
      expect(slots.inFlight).toBe(IMPORTS_IN_FLIGHT);
      // Its own release after that frees nothing more.
      releaseTrickling();
      expect(slots.inFlight).toBe(IMPORTS_IN_FLIGHT);
      releaseComplete();
      // One arriving at the floor keeps its slot.
      let sent = 0;
      const fast = upload(() => sent);
      const releaseFast = slots.take('org-a', fast, start);
      sent = ((later - start) * SLOW_UPLOAD_BYTES_PER_SECOND) / 1_000;
      expect(() => slots.take('org-d', idle(), later)).toThrow(AppError);
      expect(fast.abandon).not.toHaveBeenCalled();
      releaseFast();
      releaseNewcomer();
      expect(slots.inFlight).toBe(0);
    });

    it('runs at most IMPORTS_IN_FLIGHT at once, half of them of one account: the next is too_many_streams; a slot is given back once, also by a failed import', async () => {
      expect(slots.inFlight).toBe(0);
      // IMPORTS_IN_FLIGHT 2: an account holds one at most.
      const releases = [slots.take('org-a', idle())];
      expect(() => slots.take('org-a', idle())).toThrow(AppError);
      releases.push(slots.take('org-b', idle()));
      expect(slots.inFlight).toBe(IMPORTS_IN_FLIGHT);
      let refused: unknown;
      try {
        slots.take('org-c', idle());
      } catch (error) {
        refused = error;
      }
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).code).toBe('too_many_streams');
      expect((refused as AppError).headers).toEqual({ 'Retry-After': '5' });

      // Giving one back twice frees one slot, not two.
      releases[0]();
      releases[0]();
      expect(slots.inFlight).toBe(IMPORTS_IN_FLIGHT - 1);
      const again = slots.take('org-a', idle());
      expect(() => slots.take('org-c', idle())).toThrow(AppError);
      again();
      releases[1]();
      expect(slots.inFlight).toBe(0);

      // Through the interceptor: a refused import gives its slot back.
      const interceptor = moduleRef.get(ImportSlotInterceptor);
      const organizationId = await factory.organization();
      await expect(
        lastValueFrom(
          interceptor.intercept(asCaller(organizationId), {
            handle: () => {
              expect(slots.inFlight).toBe(1);
              return throwError(() => AppError.validation([]));
            },
          }),
        ),
      ).rejects.toBeInstanceOf(AppError);
      expect(slots.inFlight).toBe(0);
    });

    it('refuses a body over IMPORT_MAX_BYTES and a string over 65,536 characters; nothing is written', async () => {
      const organizationId = await factory.organization();
      const empty = await holdings(organizationId);

      const padded = documentOf('jan');
      padded.end_user.metadata = { note: 'x'.repeat(IMPORT_MAX_BYTES) };
      await expectAppError(spool(padded), 'payload_too_large');

      // Under the body's limit, over a string's: named by its pointer, not built.
      const long = documentOf('jan');
      long.memories[1].content = 'y'.repeat(65_537);
      const refused: unknown = await importDocument(organizationId, long).catch((e) => e);
      expect(refused).toBeInstanceOf(AppError);
      expect((refused as AppError).code).toBe('validation_failed');
      // The piece's own limit (not the 32,000 characters of a reply, checked once built).
      expect((refused as AppError).details).toEqual([
        { field: '/memories/1/content', problem: "is longer than a document's strings may be" },
      ]);
      expect(await holdings(organizationId)).toEqual(empty);
    });
  });
});
