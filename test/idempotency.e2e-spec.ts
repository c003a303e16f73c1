import { Body, Controller, Headers, Module, Post } from '@nestjs/common';
import { IsBoolean } from 'class-validator';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Client } from 'pg';
import type { Response } from 'supertest';
import { DataSource } from 'typeorm';
import { Scopes } from '../src/common/auth/auth.decorators';
import { IdempotencyRetentionWorker } from '../src/idempotency/idempotency-retention.worker';
import { AcceptsIdempotencyKey } from '../src/idempotency/accepts-idempotency-key.decorator';
import { IdempotencyModule } from '../src/idempotency/idempotency.module';
import { IdempotencyService } from '../src/idempotency/idempotency.service';
import { expectError, expectRequestId } from './support/assertions';
import { clonePersonality, uniqueUserId } from './support/data-plane';
import { FakeOpenAI } from './support/fake-openai';
import { signUp, tenantWithKey, uniqueEmail } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { eventually } from './support/wait';

class TransactionProbeDto {
  @IsBoolean()
  fail: boolean;
}

/**
 * A feature whose work is one transaction and that records its answer in it
 * (IdempotencyService.recordInTransaction), as a product route would.
 */
@Scopes('read_write')
@Controller('v1/test-idempotency')
class TransactionProbeController {
  private runs = 0;

  constructor(
    private readonly dataSource: DataSource,
    private readonly idempotency: IdempotencyService,
  ) {}

  @Post('in-transaction')
  @AcceptsIdempotencyKey()
  async work(
    @Body() body: TransactionProbeDto,
    @Headers('idempotency-key') key: string,
  ): Promise<Record<string, unknown>> {
    const run = ++this.runs;
    let seenOutside: unknown;
    await this.dataSource.transaction(async (manager) => {
      await this.idempotency.recordInTransaction(manager, 201, { run });
      // Another connection does not see the key done before the work commits.
      const rows = await this.dataSource.query<Array<{ response_status: number | null }>>(
        'SELECT response_status FROM idempotency_keys WHERE key = $1',
        [key],
      );
      seenOutside = rows[0]?.response_status;
      if (body.fail) throw new Error('the work failed after recording its answer');
    });
    return { run, seen_outside_before_commit: seenOutside };
  }
}

@Module({ imports: [IdempotencyModule], controllers: [TransactionProbeController] })
class TransactionProbeModule {}

type Tenant = Awaited<ReturnType<typeof tenantWithKey>>;

const newKey = () => `key-${randomUUID()}`;

/** The replay carries the stored status and body, the header, and a request id of its own. */
function expectReplayOf(replay: Response, first: Response): void {
  expect(replay.status).toBe(first.status);
  expect(replay.headers['idempotent-replayed']).toBe('true');
  expect(expectRequestId(replay)).not.toBe(first.headers['x-request-id']);
}

describe('Idempotency-Key (contract §16)', () => {
  let fake: FakeOpenAI;
  let t: TestApp;
  let db: DataSource;
  let tenant: Tenant;
  let personalityId: string;

  beforeAll(async () => {
    fake = await FakeOpenAI.start();
    t = await createTestApp({
      env: {
        RESPONSE_ENGINE: 'openai',
        OPENAI_BASE_URL: fake.url,
        OPENAI_API_KEY: 'sk-test',
        OPENAI_MODEL: 'default-model',
        ENGINE_TIMEOUT_MS: '5000',
      },
      imports: [TransactionProbeModule],
    });
    db = t.app.get(DataSource);
    tenant = await tenantWithKey(t, ['admin']);
    personalityId = await clonePersonality(t, tenant.auth);
  });
  afterEach(() => fake.reset());
  afterAll(async () => {
    await t.close();
    await fake.close();
  });

  const post = (path: string, body: unknown, key: string | undefined, auth = tenant.auth) => {
    const call = t.http().post(path).set('Authorization', auth);
    if (key !== undefined) call.set('Idempotency-Key', key);
    return call.send(body as object);
  };

  const keyRows = async (key: string) =>
    Number(
      (
        await db.query<Array<{ n: number }>>(
          'SELECT count(*)::int AS n FROM idempotency_keys WHERE key = $1',
          [key],
        )
      )[0].n,
    );

  const memoryCount = async (userId: string, organizationId = tenant.organizationId) =>
    Number(
      (
        await db.query<Array<{ n: number }>>(
          `SELECT count(*)::int AS n FROM memories m JOIN end_users e ON e.id = m.end_user_id
            WHERE e.organization_id = $1 AND e.user_id = $2`,
          [organizationId, userId],
        )
      )[0].n,
    );

  const personalityCount = async (organizationId = tenant.organizationId) =>
    Number(
      (
        await db.query<Array<{ n: number }>>(
          'SELECT count(*)::int AS n FROM personalities WHERE organization_id = $1',
          [organizationId],
        )
      )[0].n,
    );

  describe('the header', () => {
    it.each([
      ['empty', ''],
      ['longer than 255 characters', 'k'.repeat(256)],
      ['a tab', 'a\tb'],
      ['a non-ASCII character', 'clé'],
    ])('is refused when %s: 400 validation_failed, nothing runs', async (_case, value) => {
      const userId = uniqueUserId();
      const response = await post('/v1/end-users', { user_id: userId }, value);
      expectError(response, 400, 'validation_failed');
      expect(response.body.error.details).toEqual([
        { field: 'Idempotency-Key', problem: expect.stringContaining('printable ASCII') },
      ]);
      expect(
        (await t.http().get(`/v1/end-users/${userId}`).set('Authorization', tenant.auth)).status,
      ).toBe(404);
    });

    it('takes 255 printable ASCII characters, spaces and symbols included', async () => {
      const key = `${' ~!"#$%&()*+,-./:;<=>?@[\\]^_{|}'}${'x'.repeat(224)}`.slice(0, 255);
      expect(key).toHaveLength(255);
      const body = { user_id: uniqueUserId() };
      const first = await post('/v1/end-users', body, key);
      expect(first.status).toBe(201);
      const again = await post('/v1/end-users', body, key);
      expectReplayOf(again, first);
    });

    it('leaves a request without it as it was: no key stored, no replay header', async () => {
      const before = Number(
        (await db.query<Array<{ n: number }>>('SELECT count(*)::int AS n FROM idempotency_keys'))[0]
          .n,
      );
      const body = { user_id: uniqueUserId() };
      const first = await post('/v1/end-users', body, undefined);
      const second = await post('/v1/end-users', body, undefined);
      expect([first.status, second.status]).toEqual([201, 200]);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      const after = Number(
        (await db.query<Array<{ n: number }>>('SELECT count(*)::int AS n FROM idempotency_keys'))[0]
          .n,
      );
      expect(after).toBe(before);
    });
  });

  describe('the OpenAPI document', () => {
    it('offers the header, 409 and 422 on authenticated POSTs, not on public ones or the webhook', async () => {
      const { body: document } = await t.http().get('/v1/openapi.json').expect(200);
      const post = (path: string) => document.paths[path].post;
      const headerOf = (operation: { parameters?: Array<{ in: string; name: string }> }) =>
        (operation.parameters ?? []).filter(
          (p) => p.in === 'header' && p.name.toLowerCase() === 'idempotency-key',
        );
      const endUsers = post('/v1/end-users');
      expect(headerOf(endUsers)).toHaveLength(1);
      expect(endUsers.responses['409'].description).toContain('end_user_under_deletion');
      expect(endUsers.responses['409'].description).toContain('idempotency_key_in_progress');
      expect(
        endUsers.responses['409'].description.match(/idempotency_key_in_progress/g),
      ).toHaveLength(1);
      expect(endUsers.responses['409'].headers['Retry-After']).toBeDefined();
      expect(endUsers.responses['422'].description).toContain('idempotency_key_reused');
      expect(endUsers.responses['201'].headers['Idempotent-Replayed']).toBeDefined();
      expect(headerOf(post('/v1/respond'))).toHaveLength(1);
      expect(headerOf(post('/v1/organizations'))).toHaveLength(1);
      expect(headerOf(post('/v1/billing/payment-methods'))).toHaveLength(1);
      expect(headerOf(post('/v1/auth/signup'))).toHaveLength(0);
      expect(headerOf(post('/v1/billing/webhooks'))).toHaveLength(0);
      expect(post('/v1/billing/webhooks').responses['422']).toBeUndefined();
    });
  });

  describe('replay', () => {
    it('POST /v1/end-users: the stored 201 and body again, with the header and a new request id', async () => {
      const key = newKey();
      const body = { user_id: uniqueUserId(), metadata: { plan: 'pro' } };
      const first = await post('/v1/end-users', body, key);
      expect(first.status).toBe(201);
      expect(first.headers['idempotent-replayed']).toBeUndefined();
      const again = await post('/v1/end-users', body, key);
      expectReplayOf(again, first);
      // A second run would have answered 200 (the end user exists): this is the stored 201.
      expect(again.body).toEqual(first.body);
      expect(again.headers['content-type']).toMatch(/^application\/json/);
      // The same body in another key order is the same request.
      const reordered = await t
        .http()
        .post('/v1/end-users')
        .set('Authorization', tenant.auth)
        .set('Idempotency-Key', key)
        .set('Content-Type', 'application/json')
        .send(`{"metadata":{"plan":"pro"},"user_id":${JSON.stringify(body.user_id)}}`);
      expectReplayOf(reordered, first);
    });

    it('POST /v1/respond: the reply is replayed and the exchange stored once', async () => {
      const key = newKey();
      const userId = uniqueUserId();
      const body = { personality_id: personalityId, user_id: userId, message: 'hello there' };
      const first = await post('/v1/respond', body, key);
      expect(first.status).toBe(200);
      const again = await post('/v1/respond', body, key);
      expectReplayOf(again, first);
      expect(again.body).toEqual(first.body);
      expect(fake.requests).toHaveLength(1);
      expect(await memoryCount(userId)).toBe(2);
    });

    it('a streamed POST /v1/respond is replayed as its final JSON', async () => {
      const key = newKey();
      const userId = uniqueUserId();
      const body = {
        personality_id: personalityId,
        user_id: userId,
        message: 'stream it',
        stream: true,
      };
      const first = await post('/v1/respond', body, key)
        .buffer(true)
        .parse((res, done) => {
          let text = '';
          res.on('data', (chunk: Buffer) => (text += chunk.toString()));
          res.on('end', () => done(null, text));
        });
      expect(first.status).toBe(200);
      expect(first.headers['content-type']).toMatch(/^text\/event-stream/);
      const done = /event: done\ndata: (.+)\n/.exec(first.body as string)?.[1];
      expect(done).toBeDefined();
      const again = await post('/v1/respond', body, key);
      expect(again.status).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(again.headers['content-type']).toMatch(/^application\/json/);
      expect(again.body).toEqual(JSON.parse(done!));
      expect(fake.requests).toHaveLength(1);
      expect(await memoryCount(userId)).toBe(2);
    });

    it('a streamed reply whose client leaves while it is being stored: a retry replays it', async () => {
      const key = newKey();
      const userId = uniqueUserId();
      const body = { personality_id: personalityId, user_id: userId, message: 'stay?' };
      // A first reply: the month's token row exists, and a session can hold it.
      expect((await post('/v1/respond', body, undefined)).status).toBe(200);
      const holder = new Client({ connectionString: process.env.DATABASE_URL });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query(
          'SELECT 1 FROM token_usage_months WHERE organization_id = $1 FOR UPDATE',
          [tenant.organizationId],
        );
        const { pid } = (await holder.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))
          .rows[0];
        if (!t.server.listening) {
          await new Promise<void>((resolve) => t.server.listen(0, '127.0.0.1', resolve));
        }
        const { port } = t.server.address() as AddressInfo;
        const payload = JSON.stringify({ ...body, stream: true });
        const request = httpRequest({
          host: '127.0.0.1',
          port,
          method: 'POST',
          path: '/v1/respond',
          headers: {
            authorization: tenant.auth,
            'idempotency-key': key,
            'content-type': 'application/json',
            'content-length': Buffer.byteLength(payload),
          },
        });
        request.on('error', () => undefined);
        request.end(payload);
        // The reply's statement waits for the row: its work is done, its answer not stored.
        await eventually(async () => {
          const rows = await db.query<Array<{ n: number }>>(
            'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY (pg_blocking_pids(pid))',
            [pid],
          );
          return rows[0].n > 0 ? true : undefined;
        }, 'the reply waiting to be stored');
        request.destroy();
        await new Promise((resolve) => setTimeout(resolve, 200));
        await holder.query('COMMIT');
      } finally {
        await holder.end();
      }
      await eventually(
        async () => ((await memoryCount(userId)) === 4 ? true : undefined),
        'the exchange stored',
      );
      const again = await eventually(async () => {
        const answer = await post('/v1/respond', { ...body, stream: true }, key);
        return answer.status === 409 ? undefined : answer;
      }, 'the key no longer in progress');
      expect(again.status).toBe(200);
      expect(again.headers['idempotent-replayed']).toBe('true');
      expect(fake.requests).toHaveLength(2);
      expect(await memoryCount(userId)).toBe(4);
    });

    it('a 4xx the work decided is stored and replayed, with the replay’s own request id', async () => {
      const key = newKey();
      const first = await post('/v1/personalities/from-catalog', { slug: 'no-such-slug' }, key);
      expectError(first, 404, 'not_found');
      const again = await post('/v1/personalities/from-catalog', { slug: 'no-such-slug' }, key);
      expectError(again, 404, 'not_found');
      expectReplayOf(again, first);
      expect(again.body.error.message).toBe(first.body.error.message);
    });

    it('a refused body is not stored: the corrected request runs under the same key', async () => {
      const key = newKey();
      const bad = await post('/v1/end-users', { user_id: '' }, key);
      expectError(bad, 400, 'validation_failed');
      expect(await keyRows(key)).toBe(0);
      const good = await post('/v1/end-users', { user_id: uniqueUserId() }, key);
      expect(good.status).toBe(201);
      expect(good.headers['idempotent-replayed']).toBeUndefined();
    });

    it('a secret shown once is null in a replay and never stored: API key creation and rolling', async () => {
      const key = newKey();
      const body = { name: `replayed ${key}`, scopes: ['read'] };
      const first = await post('/v1/api-keys', body, key);
      expect(first.status).toBe(201);
      expect(first.body.key).toMatch(/^pk_/);
      const again = await post('/v1/api-keys', body, key);
      expectReplayOf(again, first);
      expect(again.body).toEqual({ ...first.body, key: null });
      expect(again.headers['cache-control']).toBe('no-store');
      const stored = await db.query<Array<{ response_body: string }>>(
        'SELECT response_body FROM idempotency_keys WHERE key = $1',
        [key],
      );
      expect(stored[0].response_body).not.toContain(first.body.key as string);

      const rollKey = newKey();
      const rolled = await post(`/v1/api-keys/${first.body.id}/roll`, {}, rollKey);
      expect(rolled.status).toBe(201);
      expect(rolled.body.key).toMatch(/^pk_/);
      const rolledAgain = await post(`/v1/api-keys/${first.body.id}/roll`, {}, rollKey);
      expectReplayOf(rolledAgain, rolled);
      expect(rolledAgain.body).toEqual({ ...rolled.body, key: null });
      // Rolled once: one new key besides the original.
      const keys = await t.http().get('/v1/api-keys?limit=100').set('Authorization', tenant.auth);
      expect(
        (keys.body.data as Array<{ name: string }>).filter((k) => k.name === body.name),
      ).toHaveLength(2);
    });
  });

  describe('a different request under the same key', () => {
    it('another body: 422 idempotency_key_reused', async () => {
      const key = newKey();
      expect((await post('/v1/end-users', { user_id: uniqueUserId() }, key)).status).toBe(201);
      const userId = uniqueUserId();
      const other = await post('/v1/end-users', { user_id: userId }, key);
      expectError(other, 422, 'idempotency_key_reused');
      expect(
        (await t.http().get(`/v1/end-users/${userId}`).set('Authorization', tenant.auth)).status,
      ).toBe(404);
    });

    it('another path: 422 idempotency_key_reused', async () => {
      const key = newKey();
      expect((await post('/v1/end-users', { user_id: uniqueUserId() }, key)).status).toBe(201);
      const before = await personalityCount();
      const other = await post('/v1/personalities/from-catalog', { slug: 'sage-mentor' }, key);
      expectError(other, 422, 'idempotency_key_reused');
      expect(await personalityCount()).toBe(before);
    });
  });

  describe("a personality's deletion", () => {
    it('forgets the stored answers of the replies it spoke: a retry runs afresh', async () => {
      const spoken = await clonePersonality(t, tenant.auth);
      const userId = uniqueUserId();
      const body = { personality_id: spoken, user_id: userId, message: 'remember me' };
      const kept = { ...body, personality_id: personalityId };
      const [key, otherKey] = [newKey(), newKey()];
      expect((await post('/v1/respond', body, key)).status).toBe(200);
      const other = await post('/v1/respond', kept, otherKey);
      expect(other.status).toBe(200);
      await t
        .http()
        .delete(`/v1/personalities/${spoken}`)
        .set('Authorization', tenant.auth)
        .expect(204);
      // Before, the reply of the deleted personality, whose conversation went with it, was
      // replayed for the key's 24 hours. Now the retry runs: the personality is gone.
      const again = await post('/v1/respond', body, key);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expectError(again, 404, 'not_found');
      // Another personality's reply to the same end user is still replayed.
      expectReplayOf(await post('/v1/respond', kept, otherKey), other);
      expect(fake.requests).toHaveLength(2);
    });
  });

  describe('while the first request runs', () => {
    it('the same request answers 409 idempotency_key_in_progress, then the stored answer', async () => {
      fake.respondWith({ delayMs: 800 });
      const key = newKey();
      const userId = uniqueUserId();
      const body = { personality_id: personalityId, user_id: userId, message: 'take your time' };
      const first = post('/v1/respond', body, key).then((r) => r);
      await fake.waitForRequests(1);
      const meanwhile = await post('/v1/respond', body, key);
      expectError(meanwhile, 409, 'idempotency_key_in_progress');
      expect(meanwhile.headers['retry-after']).toBe('1');
      const other = await post('/v1/respond', { ...body, message: 'else' }, key);
      expectError(other, 422, 'idempotency_key_reused');
      const answered = await first;
      expect(answered.status).toBe(200);
      const after = await post('/v1/respond', body, key);
      expectReplayOf(after, answered);
      expect(after.body).toEqual(answered.body);
      expect(fake.requests).toHaveLength(1);
      expect(await memoryCount(userId)).toBe(2);
    });

    it("keeps it in progress when one of the end user's memories is deleted meanwhile, then forgets its answer", async () => {
      const userId = uniqueUserId();
      const body = { personality_id: personalityId, user_id: userId, message: 'take your time' };
      expect((await post('/v1/respond', { ...body, message: 'hello' }, newKey())).status).toBe(200);
      const [memory] = (
        await t
          .http()
          .get(`/v1/end-users/${userId}/memories`)
          .set('Authorization', tenant.auth)
          .expect(200)
      ).body.data as Array<{ id: string }>;
      fake.respondWith({ delayMs: 800 });
      const key = newKey();
      const first = post('/v1/respond', body, key).then((r) => r);
      await fake.waitForRequests(2);
      await t
        .http()
        .delete(`/v1/end-users/${userId}/memories/${memory.id}`)
        .set('Authorization', tenant.auth)
        .expect(204);
      // The deletion does not take the key from the request still running: a retry meanwhile
      // does not run the reply a second time (found by review).
      expectError(await post('/v1/respond', body, key), 409, 'idempotency_key_in_progress');
      const answered = await first;
      expect(answered.status).toBe(200);
      expect(fake.requests).toHaveLength(2);
      // But its answer, which may hold what was deleted, is not kept: a retry runs afresh, as
      // one after a deletion that came once the answer was stored (before, it was replayed).
      const again = await post('/v1/respond', body, key);
      expect(again.status).toBe(200);
      expect(again.headers['idempotent-replayed']).toBeUndefined();
      expect(fake.requests).toHaveLength(3);
    });

    it('concurrent identical requests do the work once', async () => {
      const key = newKey();
      const before = await personalityCount();
      const answers = await Promise.all(
        Array.from({ length: 12 }, () =>
          post('/v1/personalities/from-catalog', { slug: 'sage-mentor' }, key),
        ),
      );
      expect(await personalityCount()).toBe(before + 1);
      const fresh = answers.filter((a) => a.status === 201 && !a.headers['idempotent-replayed']);
      expect(fresh).toHaveLength(1);
      for (const answer of answers) {
        if (answer.status === 409) expectError(answer, 409, 'idempotency_key_in_progress');
        else {
          expect(answer.status).toBe(201);
          expect(answer.body).toEqual(fresh[0].body);
        }
      }
    });

    it('concurrent requests under several keys, claimed and answered together, do each key’s work once', async () => {
      // 40 requests at once, 5 per key, interleaved: the claims (and the answers) of concurrent
      // requests share statements, duplicates of one key among them.
      const keys = Array.from({ length: 8 }, newKey);
      const before = await personalityCount();
      const answers = await Promise.all(
        Array.from({ length: 40 }, (_, i) =>
          post('/v1/personalities/from-catalog', { slug: 'sage-mentor' }, keys[i % keys.length]),
        ),
      );
      expect(await personalityCount()).toBe(before + keys.length);
      keys.forEach((key, k) => {
        const mine = answers.filter((_, i) => i % keys.length === k);
        const fresh = mine.filter((a) => a.status === 201 && !a.headers['idempotent-replayed']);
        expect(fresh).toHaveLength(1);
        for (const answer of mine) {
          if (answer.status === 409) expectError(answer, 409, 'idempotency_key_in_progress');
          else expect(answer.body).toEqual(fresh[0].body);
        }
      });
      for (const key of keys) {
        const replay = await post('/v1/personalities/from-catalog', { slug: 'sage-mentor' }, key);
        expect(replay.status).toBe(201);
        expect(replay.headers['idempotent-replayed']).toBe('true');
      }
    });

    it('a first request whose instance died (lease lapsed) does not hold the key for ever', async () => {
      const key = newKey();
      const body = { user_id: uniqueUserId() };
      const hash = await (async () => {
        // What a crash leaves: the claim of a request that never answered.
        const first = await post('/v1/end-users', body, key);
        expect(first.status).toBe(201);
        await db.query(
          `UPDATE idempotency_keys SET response_status = NULL, response_body = NULL,
                  completed_at = NULL, locked_by = 'crashed', locked_until = now() + interval '1 minute'
            WHERE key = $1`,
          [key],
        );
        return key;
      })();
      expectError(await post('/v1/end-users', body, hash), 409, 'idempotency_key_in_progress');
      await db.query(
        `UPDATE idempotency_keys SET locked_until = now() - interval '1 second' WHERE key = $1`,
        [key],
      );
      // Another body still may not take it.
      expectError(
        await post('/v1/end-users', { user_id: uniqueUserId() }, key),
        422,
        'idempotency_key_reused',
      );
      const retried = await post('/v1/end-users', body, key);
      expect(retried.status).toBe(200); // ran again: the end user exists
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      const replayed = await post('/v1/end-users', body, key);
      expectReplayOf(replayed, retried);
    });
  });

  describe("an answer recorded in the work's own transaction", () => {
    it('is done exactly when the work commits, and is what a retry gets', async () => {
      const key = newKey();
      const first = await post('/v1/test-idempotency/in-transaction', { fail: false }, key);
      expect(first.status).toBe(201);
      expect(first.body.seen_outside_before_commit).toBeNull();
      const stored = await db.query<Array<{ response_status: number; response_body: string }>>(
        'SELECT response_status, response_body FROM idempotency_keys WHERE key = $1',
        [key],
      );
      // What the transaction recorded, not overwritten by the interceptor afterwards.
      expect(stored).toEqual([
        { response_status: 201, response_body: JSON.stringify({ run: first.body.run }) },
      ]);
      const again = await post('/v1/test-idempotency/in-transaction', { fail: false }, key);
      expectReplayOf(again, first);
      expect(again.body).toEqual({ run: first.body.run });
    });

    it('rolls back with the work: the key is given up and a retry runs', async () => {
      const key = newKey();
      const failed = await post('/v1/test-idempotency/in-transaction', { fail: true }, key);
      expectError(failed, 500, 'internal_error');
      expect(await keyRows(key)).toBe(0);
      const retried = await post('/v1/test-idempotency/in-transaction', { fail: true }, key);
      expectError(retried, 500, 'internal_error');
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
    });
  });

  describe('5xx answers', () => {
    it('are not stored: a retry runs again', async () => {
      fake.respondWith({ error: { status: 400 } });
      const key = newKey();
      const userId = uniqueUserId();
      const body = { personality_id: personalityId, user_id: userId, message: 'will fail' };
      const failed = await post('/v1/respond', body, key);
      expectError(failed, 502, 'engine_unavailable');
      expect(await keyRows(key)).toBe(0);
      const retried = await post('/v1/respond', body, key);
      expect(retried.status).toBe(200);
      expect(retried.headers['idempotent-replayed']).toBeUndefined();
      expect(fake.requests).toHaveLength(2);
      expect(await memoryCount(userId)).toBe(2);
    });
  });

  describe('scope', () => {
    it("another organization's request with the same key runs normally", async () => {
      const other = await tenantWithKey(t, ['read_write']);
      const key = newKey();
      const body = { user_id: uniqueUserId() };
      const mine = await post('/v1/end-users', body, key);
      const theirs = await post('/v1/end-users', body, key, other.auth);
      expect([mine.status, theirs.status]).toEqual([201, 201]);
      expect(theirs.headers['idempotent-replayed']).toBeUndefined();
      const theirsWithOtherBody = await post(
        '/v1/end-users',
        { user_id: uniqueUserId() },
        newKey(),
        other.auth,
      );
      expect(theirsWithOtherBody.status).toBe(201);
    });

    it('an access token and an API key of one organization share its keys', async () => {
      const key = newKey();
      const body = { user_id: uniqueUserId() };
      const withKey = await post('/v1/end-users', body, key);
      const withToken = await post('/v1/end-users', body, key, `Bearer ${tenant.accessToken}`);
      expectReplayOf(withToken, withKey);
    });

    it('user-only endpoints scope the key to the user, whatever the organization', async () => {
      const user = await signUp(t);
      const auth = `Bearer ${user.accessToken}`;
      const key = newKey();
      const name = `org ${key}`;
      const first = await post('/v1/organizations', { name }, key, auth);
      expect(first.status).toBe(201);
      const fromOtherOrg = await t
        .http()
        .post('/v1/organizations')
        .set('Authorization', auth)
        .set('X-Organization-Id', first.body.id as string)
        .set('Idempotency-Key', key)
        .send({ name });
      expectReplayOf(fromOtherOrg, first);
      expect(fromOtherOrg.body).toEqual(first.body);
      const someoneElse = await signUp(t);
      const theirs = await post(
        '/v1/organizations',
        { name },
        key,
        `Bearer ${someoneElse.accessToken}`,
      );
      expect(theirs.status).toBe(201);
      expect(theirs.body.id).not.toBe(first.body.id);
    });

    it('public endpoints check the header, then ignore it (nothing stored, nothing replayed)', async () => {
      const key = newKey();
      const signup = (email: string) =>
        t
          .http()
          .post('/v1/auth/signup')
          .set('Idempotency-Key', key)
          .send({ email, password: 'a long enough passphrase' });
      const first = await signup(uniqueEmail());
      const second = await signup(uniqueEmail());
      expect([first.status, second.status]).toEqual([201, 201]);
      expect(second.headers['idempotent-replayed']).toBeUndefined();
      expect(await keyRows(key)).toBe(0);
      const bad = await t
        .http()
        .post('/v1/auth/signup')
        .set('Idempotency-Key', 'x'.repeat(256))
        .send({ email: uniqueEmail(), password: 'a long enough passphrase' });
      expectError(bad, 400, 'validation_failed');
    });
  });

  describe('retention', () => {
    it('a key older than 24 hours is free again, and the purge deletes it', async () => {
      const key = newKey();
      const body = { user_id: uniqueUserId() };
      expect((await post('/v1/end-users', body, key)).status).toBe(201);
      await db.query(
        `UPDATE idempotency_keys SET created_at = now() - interval '24 hours 1 second' WHERE key = $1`,
        [key],
      );
      const later = await post('/v1/end-users', { user_id: uniqueUserId() }, key);
      expect(later.status).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();

      await db.query(
        `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = $1`,
        [key],
      );
      const fresh = newKey();
      expect((await post('/v1/end-users', { user_id: uniqueUserId() }, fresh)).status).toBe(201);
      const worker = t.app.get(IdempotencyRetentionWorker);
      // Two instances purging at once delete it once, without error.
      const [a, b] = await Promise.all([worker.purgeExpired(), worker.purgeExpired()]);
      expect(a + b).toBeGreaterThanOrEqual(1);
      expect(await keyRows(key)).toBe(0);
      expect(await keyRows(fresh)).toBe(1);
    });
  });

  // Last: a second app in this process (API keys only, so the global passport strategy of the
  // first app's access tokens does not matter any more).
  describe('two instances on one database', () => {
    it('share keys: a replay on one of what the other answered, and 409 while it runs there', async () => {
      const second = await createTestApp({
        env: {
          RESPONSE_ENGINE: 'openai',
          OPENAI_BASE_URL: fake.url,
          OPENAI_API_KEY: 'sk-test',
          OPENAI_MODEL: 'default-model',
          ENGINE_TIMEOUT_MS: '5000',
        },
      });
      try {
        const key = newKey();
        const body = { user_id: uniqueUserId() };
        const onFirst = await post('/v1/end-users', body, key);
        const onSecond = await second
          .http()
          .post('/v1/end-users')
          .set('Authorization', tenant.auth)
          .set('Idempotency-Key', key)
          .send(body);
        expectReplayOf(onSecond, onFirst);
        expect(onSecond.body).toEqual(onFirst.body);

        fake.respondWith({ delayMs: 800 });
        const slowKey = newKey();
        const userId = uniqueUserId();
        const slow = { personality_id: personalityId, user_id: userId, message: 'slowly' };
        const running = post('/v1/respond', slow, slowKey).then((r) => r);
        await fake.waitForRequests(1);
        const elsewhere = await second
          .http()
          .post('/v1/respond')
          .set('Authorization', tenant.auth)
          .set('Idempotency-Key', slowKey)
          .send(slow);
        expectError(elsewhere, 409, 'idempotency_key_in_progress');
        const answered = await running;
        expect(answered.status).toBe(200);
        const replayed = await second
          .http()
          .post('/v1/respond')
          .set('Authorization', tenant.auth)
          .set('Idempotency-Key', slowKey)
          .send(slow);
        expectReplayOf(replayed, answered);
        expect(await memoryCount(userId)).toBe(2);
      } finally {
        await second.close();
      }
    });
  });
});
