import { get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { DataSource } from 'typeorm';
import Ajv2020 from 'ajv/dist/2020';
import addFormats from 'ajv-formats';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expectError } from './support/assertions';
import { clonePersonality, respond, uniqueUserId } from './support/data-plane';
import { tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';

const repoSchema = JSON.parse(
  readFileSync(join(__dirname, '../src/exports/schemas/pmf-v1.schema.json'), 'utf8'),
);

describe('Export (PMF v1) and subject access', () => {
  let t: TestApp;
  let a: Awaited<ReturnType<typeof tenantWithKey>>;

  beforeAll(async () => {
    t = await createTestApp();
    a = await tenantWithKey(t, ['read_write']);
  });
  afterAll(() => t.close());

  it('publishes the schema (draft 2020-12) without a credential', async () => {
    const response = await t.http().get('/v1/formats/pmf-v1.schema.json');
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/schema\+json/);
    const body = JSON.parse(response.text);
    expect(body).toEqual(repoSchema);
    expect(body.$schema).toBe('https://json-schema.org/draft/2020-12/schema');
  });

  it('exports every message of every conversation, valid against the served schema', async () => {
    const schema = JSON.parse(
      (await t.http().get('/v1/formats/pmf-v1.schema.json')).text,
    ) as object;
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(ajv);
    const validate = ajv.compile(schema);

    const personalities = [
      await clonePersonality(t, a.auth, 'sage-mentor'),
      await clonePersonality(t, a.auth, 'atlas-stoic'),
    ];
    const userId = `export "quoted" ✓ ${uniqueUserId()}`;
    await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', a.auth)
      .send({ user_id: userId, metadata: { tier: 'gold', nested: { n: [1, 2] } } });
    const sent: string[] = [];
    const replies: string[] = [];
    for (let i = 0; i < 30; i++) {
      const message = `message ${i}: I'm so grateful, thank you! "quotes" \\ and\nnewlines ${'é'.repeat(i)}`;
      sent.push(message);
      const response = await respond(t, a.auth, {
        personality_id: personalities[i % 2],
        user_id: userId,
        message,
      });
      expect(response.status).toBe(200);
      replies.push(response.body.reply.text);
    }

    const response = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/export`)
      .set('Authorization', a.auth)
      .buffer(true)
      .parse((res, done) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => done(null, text));
      });
    expect(response.status).toBe(200);
    expect(response.headers['content-type']).toMatch(/^application\/json/);
    expect(response.headers['content-disposition']).toMatch(/^attachment; filename="pmf-v1.json"/);
    const document = JSON.parse(response.body as string);
    const valid = validate(document);
    expect(validate.errors ?? []).toEqual([]);
    expect(valid).toBe(true);

    expect(document).toMatchObject({
      format: 'pmf',
      version: 1,
      end_user: { user_id: userId, metadata: { tier: 'gold', nested: { n: [1, 2] } } },
    });
    expect(document.personalities.map((p: { id: string }) => p.id).sort()).toEqual(
      [...personalities].sort(),
    );
    expect(document.relationships).toHaveLength(2);
    const userMessages = document.memories.filter((m: { role: string }) => m.role === 'user');
    expect(userMessages.map((m: { content: string }) => m.content)).toEqual(sent);
    const personalityMessages = document.memories.filter(
      (m: { role: string }) => m.role === 'personality',
    );
    expect(personalityMessages.map((m: { content: string }) => m.content)).toEqual(replies);
    expect(document.memories[0].emotion).toEqual({
      name: 'gratitude',
      intensity: expect.any(Number),
    });
    const ids = document.memories.map((m: { id: string }) => BigInt(m.id));
    expect([...ids].sort((x, y) => (x < y ? -1 : 1))).toEqual(ids);
  });

  it('exports a user with no conversations; the schema refuses a broken document', async () => {
    const userId = uniqueUserId();
    await t.http().post('/v1/end-users').set('Authorization', a.auth).send({ user_id: userId });
    const response = await t
      .http()
      .get(`/v1/end-users/${userId}/export`)
      .set('Authorization', a.auth);
    expect(response.status).toBe(200);
    const document = JSON.parse(
      Buffer.isBuffer(response.body) ? response.body.toString() : response.text,
    );
    const ajv = new Ajv2020({ strict: true });
    addFormats(ajv);
    const validate = ajv.compile(repoSchema);
    expect(validate(document)).toBe(true);
    expect(document.memories).toEqual([]);
    expect(validate({ ...document, version: 2 })).toBe(false);
    expect(
      validate({
        ...document,
        memories: [{ id: '1', role: 'bot', content: 'x', created_at: document.exported_at }],
      }),
    ).toBe(false);
  });

  it('names the file after the user_id in RFC 5987 form, whatever its characters (review)', async () => {
    const userId = `o'brien (1)* ${uniqueUserId()} é`;
    await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', a.auth)
      .send({ user_id: userId })
      .expect(201);
    const response = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent(userId)}/export`)
      .set('Authorization', a.auth)
      .expect(200);
    const [, value] = /; filename\*=UTF-8''(.*)$/.exec(response.headers['content-disposition'])!;
    // attr-char or a percent-encoded octet, nothing else (RFC 5987, section 3.2.1).
    expect(value).toMatch(/^(?:[A-Za-z0-9!#$&+\-.^_`|~]|%[0-9A-F]{2})+$/);
    expect(decodeURIComponent(value)).toBe(`pmf-v1-${userId}.json`);
  });

  it('subject access returns the raw rows of every table about the user', async () => {
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId();
    // A keyed reply: its answer is kept for a replay, and concerns the user.
    await t
      .http()
      .post('/v1/respond')
      .set('Authorization', a.auth)
      .set('Idempotency-Key', `model-${userId}`)
      .send({ personality_id: personalityId, user_id: userId, message: 'hello' })
      .expect(200);
    // What the audit log says of them, and of someone else.
    for (const target of [userId, uniqueUserId()]) {
      await t.app.get(DataSource).query(
        `INSERT INTO audit_events
           (organization_id, action, actor_type, actor_id, target_type, target_id, details,
            created_at)
         VALUES ($1, 'conversation.flagged', 'api_key', 'k', 'end_user', $2, '{}', now())`,
        [a.organizationId, target],
      );
    }
    const response = await t
      .http()
      .get(`/v1/end-users/${userId}/model`)
      .set('Authorization', a.auth);
    expect(response.status).toBe(200);
    const body = JSON.parse(
      Buffer.isBuffer(response.body) ? response.body.toString() : response.text,
    );
    expect(Object.keys(body.tables).sort()).toEqual([
      'audit_events',
      'end_user_facts',
      'end_user_token_days',
      'end_users',
      'idempotency_keys',
      'memories',
      'relationship_months',
      'token_usage_end_user_months',
      'tool_turns',
    ]);
    // Left out before (found by review): the contract asks for every row about the user.
    expect(body.tables.idempotency_keys).toEqual([
      expect.objectContaining({ key: `model-${userId}`, response_status: 200 }),
    ]);
    expect(JSON.parse(body.tables.idempotency_keys[0].response_body)).toMatchObject({
      user_id: userId,
    });
    expect(body.tables.audit_events).toEqual([
      expect.objectContaining({ action: 'conversation.flagged', target_id: userId }),
    ]);
    // Who acted, from where, is the audit log's, an admin's (review): a read key saw it here.
    expect(Object.keys(body.tables.audit_events[0]).sort()).toEqual([
      'action',
      'actor_type',
      'created_at',
      'details',
      'id',
      'organization_id',
      'target_id',
      'target_type',
    ]);
    const row = body.tables.end_users[0];
    expect(row).toMatchObject({
      id: expect.any(String),
      organization_id: a.organizationId,
      user_id: userId,
      status: 'active',
      erase_after: null,
    });
    expect(body.tables.memories).toHaveLength(2);
    expect(body.tables.memories[0]).toMatchObject({ end_user_id: row.id, content: 'hello' });
    expect(body.tables.relationship_months[0]).toMatchObject({
      end_user_id: row.id,
      personality_id: personalityId,
    });
    expect(body.tables.end_user_facts).toEqual([]);
    // The local engine reports no tokens, and the reply paused for no tool.
    expect(body.tables.token_usage_end_user_months).toEqual([]);
    expect(body.tables.end_user_token_days).toEqual([]);
    expect(body.tables.tool_turns).toEqual([]);
  });

  /**
   * A large tenant's log: 20,000 events about keys, and three of `action`, an hour apart, about
   * `endUser` (or keys, for null).
   */
  const largeLog = (organizationId: string, rare: { action: string; endUser: string | null }) =>
    t.app.get(DataSource).query(
      `INSERT INTO audit_events (organization_id, action, actor_type, actor_id, target_type,
                                 target_id, details, created_at)
       SELECT $1::uuid, 'api_key.created', 'user', 'u', 'api_key', g::text, '{}'::jsonb,
              now() - g * interval '1 second'
         FROM generate_series(1, 20000) g
       UNION ALL
       SELECT $1::uuid, $2::text, 'user', 'u', CASE WHEN $3::text IS NULL THEN 'api_key' ELSE 'end_user' END,
              coalesce($3::text, g::text), '{}'::jsonb, now() - g * interval '1 hour'
         FROM generate_series(1, 3) g`,
      [organizationId, rare.action, rare.endUser],
    );
  // The statements as the service sends them (the checked-in snapshots), run as prepared.
  const statement = (file: string, start: string) => {
    const text = readFileSync(join(__dirname, '../src/queries', file), 'utf8');
    const at = text.indexOf(start);
    expect(at).toBeGreaterThanOrEqual(0);
    return text.slice(at, text.indexOf(';', at));
  };
  /** How each plan node reads audit_events: by which index, or by none (a sequential scan). */
  type PlanNode = {
    'Node Type': string;
    'Relation Name'?: string;
    'Index Name'?: string;
    Plans?: PlanNode[];
  };
  const readsOf = (node: PlanNode): Array<string | undefined> => [
    ...(node['Relation Name'] === 'audit_events' && node['Node Type'].endsWith('Scan')
      ? [node['Index Name']]
      : []),
    ...(node.Plans ?? []).flatMap(readsOf),
  ];
  type Literal = string | number | null | string[];
  const auditReads = async (text: string, values: Literal[]) => {
    const runner = t.app.get(DataSource).createQueryRunner();
    try {
      await runner.query(`PREPARE audit_plan AS ${text}`);
      // EXECUTE takes its arguments as literals (a utility statement has no parameters).
      const literal = (value: Literal): string =>
        value === null
          ? 'NULL'
          : Array.isArray(value)
            ? literal(`{${value.map((v) => JSON.stringify(v)).join(',')}}`)
            : typeof value === 'number'
              ? String(value)
              : `'${value.replace(/'/g, "''")}'`;
      const [{ 'QUERY PLAN': plans }] = (await runner.query(
        `EXPLAIN (FORMAT JSON) EXECUTE audit_plan(${values.map(literal).join(', ')})`,
      )) as Array<{ 'QUERY PLAN': Array<{ Plan: PlanNode }> }>;
      return readsOf(plans[0].Plan);
    } finally {
      await runner.query('DEALLOCATE audit_plan');
      await runner.release();
    }
  };
  it('reads an end user’s audit events by their own index, not the organization’s log, with statistics and without', async () => {
    const database = t.app.get(DataSource);
    const userId = uniqueUserId();
    const subjectAccess = statement(
      'exports.service.sql',
      `SELECT (to_jsonb(t) - 'actor_id' - 'ip' - 'request_id')::text AS "doc", t.created_at::text AS "c1", t.id::text AS "c2"\n FROM audit_events t`,
    );
    const redaction = statement('erasure.worker.sql', 'UPDATE audit_events a SET target_id');
    await largeLog(a.organizationId, { action: 'conversation.flagged', endUser: userId });
    const expectIndexed = async () => {
      expect(
        await auditReads(subjectAccess, [
          a.organizationId,
          userId,
          '[erased]',
          '-infinity',
          '00000000-0000-0000-0000-000000000000',
          100,
        ]),
      ).toEqual(['audit_events_end_user_target_idx']);
      expect(await auditReads(redaction, ['(erased)', [a.organizationId], [userId]])).toEqual([
        'audit_events_end_user_target_idx',
      ]);
    };
    // As after a bulk import (no statistics: autovacuum is off here), then as production has them.
    await expectIndexed();
    await database.query('ANALYZE audit_events');
    await expectIndexed();
  });

  it("reads one action's audit events by their own index, not the organization's log, with statistics and without", async () => {
    const database = t.app.get(DataSource);
    const organization = await tenantWithKey(t, ['read_write']);
    await largeLog(organization.organizationId, { action: 'api_key.rolled', endUser: null });
    const ofOneAction = statement(
      'audit.service.sql',
      '-- list, a page after a cursor, of one action\n',
    );
    // The first page: no cursor.
    const expectIndexed = async () =>
      expect(
        await auditReads(ofOneAction.slice(ofOneAction.indexOf('\n') + 1), [
          organization.organizationId,
          'api_key.rolled',
          null,
          null,
          organization.organizationId,
          101,
        ]),
      ).toEqual(['audit_events_organization_action_idx']);
    await expectIndexed();
    await database.query('ANALYZE audit_events');
    await expectIndexed();
    const page = await t
      .http()
      .get('/v1/audit-events?action=api_key.rolled')
      .set('Authorization', `Bearer ${organization.accessToken}`);
    expect(page.status).toBe(200);
    expect(page.body.data).toHaveLength(3);
  });

  it('subject access of an end user named as erased ones are does not list their audit events', async () => {
    const database = t.app.get(DataSource);
    // An erased end user's event, its target redacted; then a client names an end user so.
    await database.query(
      `INSERT INTO audit_events (organization_id, action, actor_type, actor_id, target_type,
                                 target_id, details, created_at)
       VALUES ($1, 'end_user.deleted', 'api_key', 'k', 'end_user', '[erased]', '{}', now())`,
      [a.organizationId],
    );
    await t
      .http()
      .post('/v1/end-users')
      .set('Authorization', a.auth)
      .send({ user_id: '[erased]' })
      .expect(201);
    const response = await t
      .http()
      .get(`/v1/end-users/${encodeURIComponent('[erased]')}/model`)
      .set('Authorization', a.auth);
    expect(response.status).toBe(200);
    const body = JSON.parse(
      Buffer.isBuffer(response.body) ? response.body.toString() : response.text,
    );
    expect(body.tables.end_users).toHaveLength(1);
    expect(body.tables.audit_events).toEqual([]);
  });

  it('subject access lists the end user’s tokens and paused turns, and no one else’s', async () => {
    const personalityId = await clonePersonality(t, a.auth);
    const [userId, otherId] = [uniqueUserId(), uniqueUserId()];
    for (const id of [userId, otherId]) {
      await respond(t, a.auth, { personality_id: personalityId, user_id: id, message: 'hi' });
    }
    const dataSource = t.app.get(DataSource);
    // As a reply through a model provider writes them (the local engine reports no tokens), and
    // a turn paused for a client tool; for both end users.
    await dataSource.query(
      `WITH u AS (SELECT id, organization_id, user_id FROM end_users
                   WHERE organization_id = $1 AND user_id = ANY($2::text[])),
            months AS (INSERT INTO token_usage_end_user_months
                         (organization_id, month, end_user_id, requests, prompt_tokens, total_tokens)
                       SELECT organization_id, m::date, id, 1, 10, 10 FROM u,
                              (VALUES ('2031-01-01'), ('2031-02-01')) v(m)),
            days AS (INSERT INTO end_user_token_days (end_user_id, organization_id, day, tokens)
                     SELECT id, organization_id, '2031-02-03', 10 FROM u)
       INSERT INTO tool_turns (id, organization_id, end_user_id, personality_id, state, expires_at)
       SELECT 'turn_' || user_id, organization_id, id, $3, '{"message": "paused"}', now() + interval '1 hour'
         FROM u`,
      [a.organizationId, [userId, otherId], personalityId],
    );
    const response = await t
      .http()
      .get(`/v1/end-users/${userId}/model`)
      .set('Authorization', a.auth);
    const body = JSON.parse(
      Buffer.isBuffer(response.body) ? response.body.toString() : response.text,
    );
    const endUserId = body.tables.end_users[0].id as string;
    expect(
      body.tables.token_usage_end_user_months.map((row: { month: string }) => row.month),
    ).toEqual(['2031-01-01', '2031-02-01']);
    expect(body.tables.end_user_token_days).toEqual([
      expect.objectContaining({ end_user_id: endUserId, day: '2031-02-03', tokens: 10 }),
    ]);
    expect(body.tables.tool_turns).toEqual([
      expect.objectContaining({
        id: `turn_${userId}`,
        end_user_id: endUserId,
        state: { message: 'paused' },
      }),
    ]);
    for (const table of ['token_usage_end_user_months', 'end_user_token_days', 'tool_turns']) {
      for (const row of body.tables[table] as Array<{ end_user_id: string }>) {
        expect(row.end_user_id).toBe(endUserId);
      }
    }
  });

  it('carries the facts, oldest first, a learned one pointing at its message; personalities carry language and replies', async () => {
    const personalityId = await clonePersonality(t, a.auth, 'sage-mentor');
    await t
      .http()
      .patch(`/v1/personalities/${personalityId}`)
      .set('Authorization', a.auth)
      .send({ language: 'de' });
    const userId = uniqueUserId('facts');
    await respond(t, a.auth, {
      personality_id: personalityId,
      user_id: userId,
      message: 'My name is Ada.',
    });
    const added = await t
      .http()
      .post(`/v1/end-users/${userId}/facts`)
      .set('Authorization', a.auth)
      .send({ content: 'Prefers tea to coffee.' });
    expect(added.status).toBe(201);

    const read = async (path: string) => {
      const response = await t.http().get(path).set('Authorization', a.auth);
      expect(response.status).toBe(200);
      return JSON.parse(Buffer.isBuffer(response.body) ? response.body.toString() : response.text);
    };
    const document = await read(`/v1/end-users/${userId}/export`);
    const ajv = new Ajv2020({ allErrors: true, strict: true });
    addFormats(ajv);
    const validate = ajv.compile(repoSchema);
    expect(validate(document) ? [] : validate.errors).toEqual([]);
    const message = document.memories.find((m: { role: string }) => m.role === 'user');
    expect(document.facts).toEqual([
      {
        id: expect.any(String),
        content: 'Their name is Ada.',
        source: 'engine',
        memory_id: message.id,
        created_at: expect.any(String),
        updated_at: expect.any(String),
      },
      { ...added.body },
    ]);
    const personality = (
      await t.http().get(`/v1/personalities/${personalityId}`).set('Authorization', a.auth)
    ).body;
    expect(document.personalities).toEqual([
      {
        id: personalityId,
        source_slug: 'sage-mentor',
        source_version: personality.source_version,
        name: personality.name,
        description: personality.description,
        traits: personality.traits,
        voice: personality.voice,
        system_prompt: personality.system_prompt,
        language: 'de',
        replies: personality.replies,
      },
    ]);

    const model = await read(`/v1/end-users/${userId}/model`);
    expect(model.tables.end_user_facts).toEqual([
      expect.objectContaining({ content: 'Their name is Ada.', memory_id: Number(message.id) }),
      expect.objectContaining({ id: added.body.id, content: 'Prefers tea to coffee.' }),
    ]);
  });

  it('needs a credential; 404 for unknown users and for another organization’s', async () => {
    const userId = uniqueUserId();
    await t.http().post('/v1/end-users').set('Authorization', a.auth).send({ user_id: userId });
    expectError(await t.http().get(`/v1/end-users/${userId}/export`), 401, 'unauthenticated');
    const b = await tenantWithKey(t, ['read']);
    expectError(
      await t.http().get(`/v1/end-users/${userId}/export`).set('Authorization', b.auth),
      404,
      'not_found',
    );
    expectError(
      await t.http().get(`/v1/end-users/${userId}/model`).set('Authorization', b.auth),
      404,
      'not_found',
    );
    expectError(
      await t.http().get(`/v1/end-users/${uniqueUserId()}/export`).set('Authorization', a.auth),
      404,
      'not_found',
    );
    // The read scope is enough.
    const reader = await tenantWithKey(t, ['read']);
    expect(
      (await t.http().get(`/v1/end-users/${userId}/export`).set('Authorization', reader.auth))
        .status,
    ).toBe(404);
  });
});

describe('Export streaming when the client goes away', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await createTestApp();
  });
  afterAll(() => t.close());

  it('frees the database connection of every abandoned export', async () => {
    const a = await tenantWithKey(t, ['read_write']);
    const personalityId = await clonePersonality(t, a.auth);
    const userId = uniqueUserId('big');
    await respond(t, a.auth, { personality_id: personalityId, user_id: userId, message: 'hi' });
    const dataSource = t.app.get(DataSource);
    // ~20 MB of memories: far more than socket buffers hold, so the server must wait on the client.
    await dataSource.query(
      `INSERT INTO memories (organization_id, end_user_id, personality_id, role, content)
       SELECT organization_id, end_user_id, personality_id, 'user', repeat('x', 400)
         FROM memories m, generate_series(1, 50000)
        WHERE m.end_user_id = (SELECT id FROM end_users WHERE user_id = $1) AND m.role = 'user'`,
      [userId],
    );
    await new Promise<void>((resolve) => t.server.listen(0, '127.0.0.1', resolve));
    const { port } = t.server.address() as AddressInfo;

    // More abandoned exports than the pool has connections (10).
    for (let i = 0; i < 12; i++) {
      await new Promise<void>((resolve, reject) => {
        const request = get(
          {
            host: '127.0.0.1',
            port,
            path: `/v1/end-users/${userId}/export`,
            headers: { authorization: a.auth },
          },
          (response) => {
            expect(response.statusCode).toBe(200);
            response.once('data', () => {
              request.destroy();
              resolve();
            });
          },
        );
        request.on('error', (error) => (request.destroyed ? resolve() : reject(error)));
      });
    }
    // The pool still serves: a whole export and an ordinary query complete.
    const whole = await t
      .http()
      .get(`/v1/end-users/${userId}/model`)
      .set('Authorization', a.auth)
      .timeout(20_000);
    expect(whole.status).toBe(200);
    expect(whole.body.tables.memories.length).toBe(50_002);
    const stuck = await dataSource.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE datname = current_database() AND state = 'idle in transaction'
          -- Held, not passing: a background job between two statements is not a stuck export.
          AND now() - state_change > interval '1 second'`,
    );
    expect(stuck[0].n).toBe(0);
  });
});
