import type { TestingModule } from '@nestjs/testing';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { from, lastValueFrom } from 'rxjs';
import type { ApiKeyCaller } from '../../src/common/auth/caller';
import { AppError } from '../../src/common/errors/app-error';
import type { SpooledDocument } from '../../src/common/http/spooled-document';
import { StreamsModule } from '../../src/common/streams/streams.module';
import { Clock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import { ExportsModule } from '../../src/exports/exports.module';
import { ImportSlotInterceptor, ImportSlots } from '../../src/exports/import-slots';
import { ImportRepository } from '../../src/exports/import.repository';
import { ImportService } from '../../src/exports/import.service';
import { OrganizationsService } from '../../src/organizations/organizations.service';
import { expectAppError } from '../support/assertions';
import { asCaller } from '../support/execution-context';
import { stopClockAt } from '../support/clocks';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { spoolBody } from '../support/spool';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- documents are built loosely
type Json = Record<string, any>;

const FACTS_LIMIT = 5;
const IMPORTS_IN_FLIGHT = 2;
const IMPORT_MAX_BYTES = 2 * 1_048_576;
/** Memories per INSERT in ImportService: a document with more is written in several. */
const MEMORY_BATCH = 1_000;

/** The environment the module's configuration is read from, set only while it is compiled. */
const ENV = {
  MEMORY_FACTS_LIMIT: String(FACTS_LIMIT),
  IMPORTS_IN_FLIGHT: String(IMPORTS_IN_FLIGHT),
  IMPORT_MAX_BYTES: String(IMPORT_MAX_BYTES),
};

/** A catalog entry shipped with the service, as a document's personality (replies included). */
const SAGE = (
  JSON.parse(
    readFileSync(join(__dirname, '../../src/personalities/data/catalog.json'), 'utf8'),
  ) as Json[]
).find((entry) => entry.slug === 'sage-mentor')!;

const SELF_HARM = 'I want to kill myself';

/**
 * ImportService alone with its module on a real PostgreSQL, without HTTP ("medium" spec): the
 * rules of docs/pmf-v1.md#import that need the database, the configuration or the clock, called
 * directly with documents spooled as the route spools them. What it holds: a refused document
 * names each bad part by JSON pointer (at most 20, all counted) and writes nothing, also when the
 * write itself fails after its first statements; duplicates inside a document are refused; times
 * are judged by the injected Clock; MEMORY_FACTS_LIMIT refuses rather than truncates; emotions are
 * held to the published vocabularies; the unique (organization, user_id) decides concurrent
 * imports, per organization; personalities are matched only within the caller's organization;
 * memories keep their order and facts their messages across statements; IMPORTS_IN_FLIGHT bounds
 * the imports running at once. The end-to-end round trip stays in exports.service.e2e-spec.ts and
 * pmf-import.e2e-spec.ts; the checker's rules one by one in src/exports/import-rules.spec.ts.
 */
describe('ImportService (real database)', () => {
  let moduleRef: TestingModule;
  let imports: ImportService;
  let database: Database;
  let factory: Factory;
  let clock: Clock;
  const spooled: SpooledDocument[] = [];

  beforeAll(async () => {
    // StreamSlots (the export route's budget, which the module needs) is AppModule's global.
    moduleRef = await moduleAlone([StreamsModule, ExportsModule], ENV);
    imports = moduleRef.get(ImportService);
    database = moduleRef.get(Database);
    clock = moduleRef.get(Clock);
    factory = new Factory(database);
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await Promise.all(spooled.splice(0).map((document) => document.close()));
  });
  afterAll(() => moduleRef?.close());

  const caller = (organizationId: string): ApiKeyCaller => ({
    kind: 'api_key',
    organizationId,
    scopes: ['read_write'],
    apiKeyId: randomUUID(),
  });

  /** A body as the route receives it, 64 KiB at a time, spooled; closed after the test. */
  async function spool(body: Json): Promise<SpooledDocument> {
    const document = await spoolBody(body, IMPORT_MAX_BYTES, 64 * 1_024);
    spooled.push(document);
    return document;
  }

  const importInto = async (organizationId: string, document: Json) =>
    imports.import(caller(organizationId), await spool(document));

  /** The refusal of an import: its code, the problems it names and its message. */
  async function refusal(organizationId: string, document: Json) {
    const error: unknown = await importInto(organizationId, document).then(
      () => undefined,
      (thrown: unknown) => thrown,
    );
    expect(error).toBeInstanceOf(AppError);
    const { code, details, message } = error as AppError;
    return { code, details, message };
  }

  /** The catalog entry as a document's personality, under a fresh id. */
  function sage(id: string = randomUUID()): Json {
    const { slug, version, ...fields } = SAGE;
    return { id, source_slug: slug, source_version: version, language: 'en', ...fields };
  }

  const HOUR = 3_600_000;
  /** Times safely in the past of the real clock. */
  const past = (hoursAgo: number) => new Date(Date.now() - hoursAgo * HOUR).toISOString();

  /** A memory of the document, said by the user unless `role` says otherwise. */
  function memory(id: string, personalityId: string, content: string, fields: Json = {}): Json {
    return {
      id,
      personality_id: personalityId,
      role: 'user',
      content,
      emotion: null,
      vocabulary_version: null,
      created_at: past(48),
      ...fields,
    };
  }

  function fact(content: string, memoryId: string | null, at = past(47)): Json {
    return {
      id: randomUUID(),
      content,
      source: memoryId === null ? 'api' : 'engine',
      memory_id: memoryId,
      created_at: at,
      updated_at: at,
    };
  }

  /** A small valid document: one personality, two messages, one fact learned from the first. */
  function documentOf(userId: string, personality: Json = sage()): Json {
    return {
      format: 'pmf',
      version: 1,
      exported_at: past(1),
      end_user: {
        user_id: userId,
        metadata: { plan: 'pro' },
        status: 'active',
        created_at: past(72),
        updated_at: past(72),
      },
      personalities: [personality],
      relationships: [],
      memories: [
        memory('1', personality.id, 'My name is Ada.', {
          emotion: { name: 'joy', intensity: 0.5 },
          vocabulary_version: '2.0.0',
        }),
        memory('2', personality.id, 'Nice to meet you, Ada.', { role: 'personality' }),
      ],
      facts: [fact('Their name is Ada', '1')],
    };
  }

  /** An endpoint for the events an import writes: without one, no event row is kept. */
  async function subscribe(organizationId: string): Promise<void> {
    await database.count(
      sql`INSERT INTO webhook_endpoints (organization_id, url, events, secret)
          VALUES (${organizationId}, 'https://hooks.example.com/in',
                  ARRAY['end_user.created', 'personality.created'], 'whsec_test')`,
    );
  }

  /** What an organization holds: every row an import may write. */
  async function holdings(organizationId: string) {
    const [row] = await database.rows<Record<string, number>>(
      sql`SELECT (SELECT count(*) FROM end_users WHERE organization_id = ${organizationId})::int AS end_users,
                 (SELECT count(*) FROM personalities WHERE organization_id = ${organizationId})::int AS personalities,
                 (SELECT count(*) FROM memories WHERE organization_id = ${organizationId})::int AS memories,
                 (SELECT count(*) FROM end_user_facts WHERE organization_id = ${organizationId})::int AS facts,
                 (SELECT count(*) FROM webhook_events WHERE organization_id = ${organizationId})::int AS events`,
    );
    return row;
  }
  const NOTHING = { end_users: 0, personalities: 0, memories: 0, facts: 0, events: 0 };

  /** The imported end user's memories as stored, in id order. */
  function memoriesOf(organizationId: string, userId: string) {
    return database.rows<{ id: string; content: string; safety: Json; personality_id: string }>(
      sql`SELECT m.id, m.content, m.safety, m.personality_id FROM memories m
            JOIN end_users e ON e.id = m.end_user_id
           WHERE e.organization_id = ${organizationId} AND e.user_id = ${userId}
           ORDER BY m.id`,
    );
  }

  describe('what a document may hold', () => {
    it('names every bad part by JSON pointer in document order, at most 20, counting them all; writes nothing', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('ada');
      document.end_user.user_id = 'line\nbreak';
      const personalityId = document.personalities[0].id as string;
      // 25 memories of a role the format does not have, after the two good ones.
      for (let i = 0; i < 25; i++) {
        document.memories.push(
          memory(String(100 + i), personalityId, `Line ${i}`, { role: 'bot' }),
        );
      }

      const refused = await refusal(organizationId, document);
      expect(refused.code).toBe('validation_failed');
      expect(refused.details).toHaveLength(20);
      expect(refused.details![0]).toEqual({
        field: '/end_user/user_id',
        problem: expect.any(String),
      });
      expect(refused.details!.slice(1).map((d) => d.field)).toEqual(
        Array.from({ length: 19 }, (_, i) => `/memories/${i + 2}/role`),
      );
      expect(refused.message).toContain('26 problem(s)');
      expect(await holdings(organizationId)).toEqual(NOTHING);
    });

    it('refuses repeats inside a document: a memory id, a personality id in any case, a fact case and white space aside', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('bea');
      const personality = document.personalities[0];
      document.personalities.push({ ...sage(), id: personality.id.toUpperCase() });
      document.memories.push(memory('1', personality.id, 'Said twice under one id'));
      document.facts.push(fact('  their NAME is   ada ', null));

      expect(await refusal(organizationId, document)).toMatchObject({
        code: 'validation_failed',
        details: [
          { field: '/personalities/1/id', problem: 'repeats the id of /personalities/0' },
          { field: '/memories/2/id', problem: 'repeats the id of /memories/0' },
          { field: '/facts/1/content', problem: 'repeats /facts/0 (case and white space aside)' },
        ],
      });
      expect(await holdings(organizationId)).toEqual(NOTHING);
    });

    it('holds emotions to the published vocabularies; with no version, a name any version had', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('cal');
      const personalityId = document.personalities[0].id as string;
      const feeling = (name: string, version: string | null) => ({
        emotion: { name, intensity: 0.4 },
        vocabulary_version: version,
      });
      document.memories = [
        memory('1', personalityId, 'a', feeling('joy', '9.9.9')),
        // gratitude came with 2.0.0; 1.0.0 does not have it.
        memory('2', personalityId, 'b', feeling('gratitude', '1.0.0')),
        memory('3', personalityId, 'c', feeling('bliss', null)),
      ];
      document.facts = [];
      expect((await refusal(organizationId, document)).details).toEqual([
        {
          field: '/memories/0/vocabulary_version',
          problem: expect.stringContaining('not a published emotion vocabulary version'),
        },
        {
          field: '/memories/1/emotion/name',
          problem: 'is not an emotion of its vocabulary version',
        },
        {
          field: '/memories/2/emotion/name',
          problem: expect.stringContaining('any vocabulary version'),
        },
      ]);
      expect(await holdings(organizationId)).toEqual(NOTHING);

      // trust is 1.x's only: taken without a version, and with its own.
      document.memories = [
        memory('1', personalityId, 'a', feeling('trust', null)),
        memory('2', personalityId, 'b', feeling('trust', '1.2.0')),
      ];
      await expect(importInto(organizationId, document)).resolves.toMatchObject({
        memories_imported: 2,
      });
    });

    it('refuses more facts than MEMORY_FACTS_LIMIT rather than dropping some; takes exactly the limit', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('dan');
      document.facts = Array.from({ length: FACTS_LIMIT + 1 }, (_, i) => fact(`Fact ${i}`, null));
      const refused = await refusal(organizationId, document);
      expect(refused.details![0]).toEqual({
        field: '/facts',
        problem: expect.stringContaining(`holds ${FACTS_LIMIT + 1} facts`),
      });
      expect(await holdings(organizationId)).toEqual(NOTHING);

      document.facts.pop();
      expect(await importInto(organizationId, document)).toMatchObject({
        facts_imported: FACTS_LIMIT,
      });
    });

    it('judges times by the injected clock: refused while in its future, taken once it has passed them; updated_at is its time', async () => {
      const organizationId = await factory.organization();
      const now = Date.parse('2031-06-01T12:00:00.000Z');
      stopClockAt(clock, now);
      const later = new Date(now + HOUR).toISOString();
      const document = documentOf('eli');
      document.end_user.created_at = later;
      document.memories[1].created_at = later;
      document.facts[0].updated_at = later;
      document.exported_at = new Date(now + 2 * HOUR).toISOString();

      expect((await refusal(organizationId, document)).details).toEqual([
        { field: '/end_user/created_at', problem: 'must not be in the future' },
        { field: '/memories/1/created_at', problem: 'must not be in the future' },
        { field: '/facts/0/updated_at', problem: 'must not be in the future' },
      ]);
      expect(await holdings(organizationId)).toEqual(NOTHING);

      // Two hours on, the same document is in the past (exported_at is not judged: not stored).
      stopClockAt(clock, now + 2 * HOUR);
      await importInto(organizationId, document);
      const [endUser] = await database.rows<{ created_at: Date; updated_at: Date }>(
        sql`SELECT created_at, updated_at FROM end_users
             WHERE organization_id = ${organizationId} AND user_id = 'eli'`,
      );
      expect(endUser.created_at.toISOString()).toBe(later);
      expect(endUser.updated_at.getTime()).toBe(now + 2 * HOUR);
    });
  });

  describe('what an import writes', () => {
    it('writes nothing when the write fails after its first statements: end user, personality, memories taken back', async () => {
      const organizationId = await factory.organization();
      await subscribe(organizationId);
      const before = await holdings(organizationId);
      // The facts are the last statement: everything else is written by then.
      jest
        .spyOn(moduleRef.get(ImportRepository), 'insertFacts')
        .mockRejectedValueOnce(new Error('the connection dropped'));
      await expect(importInto(organizationId, documentOf('fay'))).rejects.toThrow(
        'the connection dropped',
      );
      expect(await holdings(organizationId)).toEqual(before);

      // Nothing of it was kept: the user_id is free and the import goes through.
      await expect(importInto(organizationId, documentOf('fay'))).resolves.toEqual({
        user_id: 'fay',
        personalities_created: 1,
        memories_imported: 2,
        facts_imported: 1,
      });
      // What the failed one had written and taken back: every kind of row, its events included.
      expect(await holdings(organizationId)).toEqual({
        end_users: 1,
        personalities: 1,
        memories: 2,
        facts: 1,
        events: 2,
      });
    });

    it('stores this service’s safety verdicts, never the document’s: flagged at most, never blocked or a crisis response', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('gil');
      const personalityId = document.personalities[0].id as string;
      document.memories = [
        memory('1', personalityId, SELF_HARM, {
          safety: { flagged: false, categories: [], action: 'none' },
        }),
        memory('2', personalityId, 'Shall we talk about tea?', {
          role: 'personality',
          safety: { flagged: true, categories: ['violence'], action: 'blocked' },
        }),
        memory('3', personalityId, 'Hello again', {
          safety: { flagged: true, categories: ['self_harm'], action: 'crisis_response' },
        }),
      ];
      document.facts = [];
      await importInto(organizationId, document);
      expect((await memoriesOf(organizationId, 'gil')).map((m) => m.safety)).toEqual([
        { flagged: true, categories: ['self_harm'], action: 'flagged' },
        { flagged: false, categories: [], action: 'none' },
        { flagged: false, categories: [], action: 'none' },
      ]);
    });

    it('keeps the memories’ order across statements, and each fact points at its own message', async () => {
      const organizationId = await factory.organization();
      const document = documentOf('hal');
      const personalityId = document.personalities[0].id as string;
      const count = MEMORY_BATCH + 150;
      // Ids in descending order and times in no order: the array's order is what counts.
      document.memories = Array.from({ length: count }, (_, i) =>
        memory(String(5_000 - i), personalityId, `Message ${i}`, {
          created_at: past(100 + ((i * 7) % 13)),
        }),
      );
      document.facts = [
        fact('Said early', String(5_000 - 3)),
        fact('Said in the second statement', String(5_000 - (MEMORY_BATCH + 40))),
        fact('Said last', String(5_000 - (count - 1))),
      ];

      expect(await importInto(organizationId, document)).toMatchObject({
        memories_imported: count,
        facts_imported: 3,
      });
      const stored = await memoriesOf(organizationId, 'hal');
      expect(stored.map((m) => m.content)).toEqual(
        Array.from({ length: count }, (_, i) => `Message ${i}`),
      );
      const facts = await database.rows<{ content: string; said: string }>(
        sql`SELECT f.content, m.content AS said FROM end_user_facts f
              JOIN memories m ON m.id = f.memory_id
             WHERE f.organization_id = ${organizationId} ORDER BY f.created_at, f.content`,
      );
      expect(facts).toEqual([
        { content: 'Said early', said: 'Message 3' },
        { content: 'Said in the second statement', said: `Message ${MEMORY_BATCH + 40}` },
        { content: 'Said last', said: `Message ${count - 1}` },
      ]);
    });

    it('creates a personality named by many memories once; uses the organization’s own, named in any case, as it is', async () => {
      const organizationId = await factory.organization();
      const own = await factory.personality(organizationId, 'Our own');
      const document = documentOf('ivy');
      const created = document.personalities[0].id as string;
      document.personalities.push({ ...sage(own.toUpperCase()), name: 'Renamed by the document' });
      document.memories = [
        memory('1', created, 'To the new one'),
        memory('2', own.toUpperCase(), 'To ours'),
        memory('3', created.toUpperCase(), 'To the new one again'),
        memory('4', own, 'To ours again'),
      ];
      document.facts = [];

      expect(await importInto(organizationId, document)).toMatchObject({
        personalities_created: 1,
        memories_imported: 4,
      });
      const personalities = await database.rows<{ id: string; name: string }>(
        sql`SELECT id, name FROM personalities WHERE organization_id = ${organizationId}
             ORDER BY name`,
      );
      expect(personalities.map((p) => p.name)).toEqual(['Our own', SAGE.name]);
      const newId = personalities.find((p) => p.id !== own)!.id;
      expect((await memoriesOf(organizationId, 'ivy')).map((m) => m.personality_id)).toEqual([
        newId,
        own,
        newId,
        own,
      ]);
    });
  });

  describe('organizations and concurrency', () => {
    it('of concurrent imports of one user_id into one organization exactly one is written, whole; into another it is free', async () => {
      const a = await factory.organization();
      const b = await factory.organization();
      await subscribe(a);
      await subscribe(b);
      const document = documentOf('jay');
      const intoA = await Promise.all([1, 2, 3, 4].map(() => spool(document)));
      const intoB = await spool(document);

      const results = await Promise.allSettled([
        ...intoA.map((spooledDocument) => imports.import(caller(a), spooledDocument)),
        imports.import(caller(b), intoB),
      ]);
      const inA = results.slice(0, 4);
      expect(inA.filter((result) => result.status === 'fulfilled')).toHaveLength(1);
      for (const result of inA) {
        if (result.status === 'rejected') {
          expect(result.reason).toBeInstanceOf(AppError);
          expect((result.reason as AppError).code).toBe('end_user_exists');
        }
      }
      expect(results[4].status).toBe('fulfilled');
      // The losers took back everything they had written: one personality, not four.
      const once = { end_users: 1, personalities: 1, memories: 2, facts: 1, events: 2 };
      expect(await holdings(a)).toEqual(once);
      expect(await holdings(b)).toEqual(once);
    });

    it('tells the user_id’s state in the caller’s organization only: under deletion in one, free in another', async () => {
      const a = await factory.organization();
      const b = await factory.organization();
      await importInto(a, documentOf('kim'));
      await database.count(
        sql`UPDATE end_users SET status = 'deleting', erase_after = ${new Date(Date.now() + 60_000)}
             WHERE organization_id = ${a} AND user_id = 'kim'`,
      );
      const aBefore = await holdings(a);

      const underDeletion: unknown = await importInto(a, documentOf('kim')).catch((e) => e);
      expect(underDeletion).toBeInstanceOf(AppError);
      expect((underDeletion as AppError).code).toBe('end_user_under_deletion');
      expect((underDeletion as AppError).extra).toEqual({
        erasure_expected_at: expect.any(String),
      });
      expect(await holdings(a)).toEqual(aBefore);

      await expect(importInto(b, documentOf('kim'))).resolves.toMatchObject({ user_id: 'kim' });
      await expectAppError(importInto(b, documentOf('kim')), 'end_user_exists');
      expect(await holdings(a)).toEqual(aBefore);
    });

    it('never uses or changes another organization’s personality named by the document: the caller gets its own copy', async () => {
      const a = await factory.organization();
      const b = await factory.organization();
      const theirs = await factory.personality(a, 'A’s companion');
      const document = documentOf('lou', { ...sage(theirs), name: 'Copied' });

      expect(await importInto(b, document)).toMatchObject({ personalities_created: 1 });
      const [copy] = await database.rows<{ id: string; name: string }>(
        sql`SELECT id, name FROM personalities WHERE organization_id = ${b}`,
      );
      expect(copy.id).not.toBe(theirs);
      expect(copy.name).toBe('Copied');
      expect(new Set((await memoriesOf(b, 'lou')).map((m) => m.personality_id))).toEqual(
        new Set([copy.id]),
      );
      const [original] = await database.rows<{ name: string }>(
        sql`SELECT name FROM personalities WHERE id = ${theirs}`,
      );
      expect(original.name).toBe('A’s companion');
      expect(await holdings(a)).toMatchObject({ end_users: 0, memories: 0, personalities: 1 });
    });

    it('runs at most IMPORTS_IN_FLIGHT imports at once, half of them of one account: the next is too_many_streams before it starts; every slot comes back', async () => {
      const slots = moduleRef.get(ImportSlots);
      const interceptor = moduleRef.get(ImportSlotInterceptor);
      const organizationId = await factory.organization();
      const other = await factory.organization();
      // Their accounts (each its own: no maker) read once and kept, as an instance keeps them:
      // the slots are then taken in the order the imports come, not the order of their reads.
      const organizations = moduleRef.get(OrganizationsService);
      await Promise.all([organizationId, other].map((id) => organizations.accountOf(id)));
      const documents = await Promise.all(
        ['mia', 'ned', 'oli'].map((userId) => spool(documentOf(userId))),
      );
      const started: string[] = [];
      // As the route runs: the interceptor around the handler that calls the service.
      const throughTheRoute = (document: SpooledDocument, userId: string, of = organizationId) =>
        lastValueFrom(
          interceptor.intercept(asCaller(of), {
            handle: () => {
              started.push(userId);
              return from(imports.import(caller(of), document));
            },
          }),
        );

      // One account holds at most one of the two slots.
      const own = await Promise.allSettled([
        throughTheRoute(documents[0], 'mia'),
        throughTheRoute(documents[1], 'ned'),
      ]);
      expect(own.map((result) => result.status)).toEqual(['fulfilled', 'rejected']);
      expect(((own[1] as PromiseRejectedResult).reason as AppError).code).toBe('too_many_streams');
      started.length = 0;
      const results = await Promise.allSettled([
        throughTheRoute(documents[1], 'ned', other),
        throughTheRoute(documents[2], 'oli'),
        throughTheRoute(documents[2], 'oli', other),
      ]);
      expect(results.map((result) => result.status)).toEqual([
        'fulfilled',
        'fulfilled',
        'rejected',
      ]);
      const refused = (results[2] as PromiseRejectedResult).reason as AppError;
      expect(refused.code).toBe('too_many_streams');
      expect(refused.headers).toEqual({ 'Retry-After': '5' });
      expect(started).toEqual(['ned', 'oli']);
      expect(slots.inFlight).toBe(0);

      // A refused document gives its slot back too: then all IMPORTS_IN_FLIGHT are free again.
      const bad = await spool({ ...documentOf('pat'), version: 2 });
      await expectAppError(throughTheRoute(bad, 'pat'), 'validation_failed');
      expect(slots.inFlight).toBe(0);
      await expect(throughTheRoute(documents[2], 'oli', other)).resolves.toMatchObject({
        user_id: 'oli',
      });
      expect(await holdings(organizationId)).toMatchObject({ end_users: 2 });
      expect(await holdings(other)).toMatchObject({ end_users: 2 });
    });
  });
});
