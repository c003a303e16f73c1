import { createHash } from 'node:crypto';
import { getDataSourceToken } from '@nestjs/typeorm';
import { SignJWT } from 'jose';
import type { DataSource } from 'typeorm';
import { Clock } from '../src/common/time/clock';
import { expectError } from './support/assertions';
import { ShiftedClock } from './support/clocks';
import { createApiKey, signUp, tenantWithKey } from './support/identity';
import { createTestApp, TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';
import { sleep } from './support/wait';

const JWT_SECRET = 'e2e-secret-that-is-long-enough-for-hs256-0123456789';
const AUDIENCE = 'personality-api';
const ISSUER = 'personality-api';

describe('Credentials as an attacker sees them: API keys and access tokens', () => {
  let t: TestApp;
  let db: DataSource;
  const secrets: string[] = [];
  const clock = new ShiftedClock();

  beforeAll(async () => {
    t = await createTestApp({
      env: { ...UNTHROTTLED, JWT_SECRET },
      override: (builder) => builder.overrideProvider(Clock).useValue(clock),
    });
    db = t.app.get<DataSource>(getDataSourceToken());
  });
  afterAll(() => t.close());

  const get = (path: string, credential?: string) => {
    const request = t.http().get(path);
    return credential ? request.set('Authorization', `Bearer ${credential}`) : request;
  };

  describe('API keys', () => {
    it('shows the key once, never lists it, and stores only its SHA-256 hash', async () => {
      const owner = await signUp(t);
      secrets.push(owner.password, owner.accessToken);
      const created = await t
        .http()
        .post('/v1/api-keys')
        .set('Authorization', `Bearer ${owner.accessToken}`)
        .send({ name: 'backend', scopes: ['read_write'] });
      expect(created.status).toBe(201);
      const key: string = created.body.key;
      secrets.push(key);
      expect(Object.keys(created.body).sort()).toEqual(
        [
          'created_at',
          'created_by',
          'expires_at',
          'id',
          'key',
          'last_four',
          'last_used_at',
          'name',
          'prefix',
          'rate_limit',
          'scopes',
        ].sort(),
      );

      const list = await get('/v1/api-keys', owner.accessToken);
      expect(list.status).toBe(200);
      expect(list.body.data[0]).not.toHaveProperty('key');
      expect(JSON.stringify(list.body)).not.toContain(key.slice(11, -4));

      const rows: Array<Record<string, unknown>> = await db.query(
        'SELECT * FROM api_keys WHERE organization_id = $1',
        [owner.organizationId],
      );
      expect(rows).toHaveLength(1);
      const row = rows[0];
      expect((row.key_hash as Buffer).equals(createHash('sha256').update(key).digest())).toBe(true);
      const stored = JSON.stringify(row, (_name, value: unknown) =>
        Buffer.isBuffer(value) ? value.toString('hex') : value,
      );
      expect(stored).not.toContain(key);
      expect(stored).not.toContain(key.slice(11, -4));
    });

    it('refuses a revoked key at once, even right after it was used (and cached)', async () => {
      const owner = await signUp(t);
      const key = await createApiKey(t, owner.accessToken, ['admin']);
      secrets.push(key);
      const list = await get('/v1/api-keys', key);
      expect(list.status).toBe(200);
      const id = list.body.data[0].id as string;
      const revoked = await t
        .http()
        .delete(`/v1/api-keys/${id}`)
        .set('Authorization', `Bearer ${key}`);
      expect(revoked.status).toBe(204);
      expectError(await get('/v1/api-keys', key), 401, 'unauthenticated');
      const listed = await get('/v1/api-keys', owner.accessToken);
      expect(listed.body.data).toEqual([]);
    });

    it('refuses a key with a tampered checksum or body (401) and an expired key (401)', async () => {
      const tenant = await tenantWithKey(t, ['admin']);
      secrets.push(tenant.key);
      expect((await get('/v1/api-keys', tenant.key)).status).toBe(200);
      const last = tenant.key.slice(-1);
      const tamperedChecksum = `${tenant.key.slice(0, -1)}${last === 'A' ? 'B' : 'A'}`;
      const tamperedBody = `pk_${tenant.key[3] === 'A' ? 'B' : 'A'}${tenant.key.slice(4)}`;
      for (const bad of [
        tamperedChecksum,
        tamperedBody,
        tenant.key.slice(0, -1),
        `${tenant.key}x`,
      ]) {
        expectError(await get('/v1/api-keys', bad), 401, 'unauthenticated');
      }

      const expiring = await t
        .http()
        .post('/v1/api-keys')
        .set('Authorization', tenant.auth)
        .send({
          name: 'short-lived',
          scopes: ['read'],
          expires_at: new Date(Date.now() + 1_500).toISOString(),
        });
      expect(expiring.status).toBe(201);
      secrets.push(expiring.body.key);
      expectError(await get('/v1/api-keys', expiring.body.key), 403, 'insufficient_scope');
      clock.advance(1_700);
      try {
        expectError(await get('/v1/api-keys', expiring.body.key), 401, 'unauthenticated');
      } finally {
        clock.reset();
      }
    });

    it('answers 403 for a key without the scope and for a key on /v1/me/* and /v1/organizations', async () => {
      const reader = await tenantWithKey(t, ['read']);
      const admin = await tenantWithKey(t, ['admin']);
      secrets.push(reader.key, admin.key);
      expectError(await get('/v1/api-keys', reader.key), 403, 'insufficient_scope');
      for (const path of ['/v1/me/sso', '/v1/organizations']) {
        expectError(await get(path, admin.key), 403, 'user_token_required');
      }
    });

    it('keeps organizations apart: a key of A never sees or revokes a key of B', async () => {
      const a = await tenantWithKey(t, ['admin']);
      const b = await tenantWithKey(t, ['admin']);
      secrets.push(a.key, b.key);
      const listA = await get('/v1/api-keys', a.key);
      const listB = await get('/v1/api-keys', b.key);
      expect(listA.body.data).toHaveLength(1);
      expect(listB.body.data).toHaveLength(1);
      const bKeyId = listB.body.data[0].id as string;
      expect(listA.body.data.map((key: { id: string }) => key.id)).not.toContain(bKeyId);
      // B's key id as a cursor reveals nothing, and B's key cannot be revoked from A.
      const cursor = await get(`/v1/api-keys?starting_after=${bKeyId}`, a.key);
      expect(cursor.status).toBe(200);
      expect(cursor.body.data).toEqual([]);
      expectError(
        await t.http().delete(`/v1/api-keys/${bKeyId}`).set('Authorization', a.auth),
        404,
        'not_found',
      );
      expect((await get('/v1/api-keys', b.key)).status).toBe(200);
      expectError(
        await get('/v1/api-keys', a.accessToken).set('X-Organization-Id', b.organizationId),
        403,
        'not_a_member',
      );
    });
  });

  describe('access tokens (JWT)', () => {
    const secret = new TextEncoder().encode(JWT_SECRET);
    const now = () => Math.floor(Date.now() / 1000);
    const b64 = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

    async function forge(
      sub: string,
      options: {
        alg?: string;
        key?: Uint8Array;
        aud?: string;
        iss?: string;
        exp?: number;
        ver?: number;
      } = {},
    ): Promise<string> {
      const token = await new SignJWT({ ver: options.ver ?? 0 })
        .setProtectedHeader({ alg: options.alg ?? 'HS256', typ: 'JWT' })
        .setSubject(sub)
        .setAudience(options.aud ?? AUDIENCE)
        .setIssuer(options.iss ?? ISSUER)
        .setIssuedAt()
        .setExpirationTime(options.exp ?? now() + 600)
        .sign(options.key ?? secret);
      secrets.push(token);
      return token;
    }

    it('accepts a well-formed token (the control case for the refusals below)', async () => {
      const u = await signUp(t);
      expect((await get('/v1/organizations', await forge(u.userId))).status).toBe(200);
    });

    it('refuses a token once it expires, although it was verified (and remembered) before', async () => {
      const u = await signUp(t);
      // Whole seconds: the token may live a second less than `exp` says, so 4 leave 3 or more.
      const shortLived = await forge(u.userId, { exp: now() + 4 });
      expect((await get('/v1/organizations', shortLived)).status).toBe(200);
      expect((await get('/v1/organizations', shortLived)).status).toBe(200);
      // The expiry is passport-jwt's check, on jsonwebtoken's own clock (the real time).
      await sleep(4_100);
      expectError(await get('/v1/organizations', shortLived), 401, 'unauthenticated');
    });

    it('refuses alg none, a wrong audience or issuer, an expired token, another secret, another algorithm: 401', async () => {
      const u = await signUp(t);
      const cases: Record<string, string> = {
        'alg none': `${b64({ alg: 'none', typ: 'JWT' })}.${b64({
          sub: u.userId,
          ver: 0,
          aud: AUDIENCE,
          iss: ISSUER,
          exp: now() + 600,
        })}.`,
        'wrong audience': await forge(u.userId, { aud: 'another-service' }),
        'wrong issuer': await forge(u.userId, { iss: 'https://evil.example' }),
        expired: await forge(u.userId, { exp: now() - 60 }),
        'another secret': await forge(u.userId, {
          key: new TextEncoder().encode('another-secret-that-is-also-long-enough-0123456789'),
        }),
        HS512: await forge(u.userId, { alg: 'HS512' }),
        'old token version': await forge(u.userId, { ver: 7 }),
        'unknown user': await forge('00000000-0000-4000-8000-000000000000'),
        'tampered payload': (() => {
          const [header, , signature] = u.accessToken.split('.');
          return `${header}.${b64({ sub: u.userId, ver: 0, aud: AUDIENCE, iss: ISSUER, exp: now() + 9999 })}.${signature}`;
        })(),
      };
      for (const [name, token] of Object.entries(cases)) {
        const response = await get('/v1/organizations', token);
        expect({ name, status: response.status }).toEqual({ name, status: 401 });
        expectError(response, 401, 'unauthenticated');
      }
    });
  });

  it('writes no password, token or key to any log line', () => {
    const text = t.logs.text();
    expect(secrets.length).toBeGreaterThan(10);
    for (const secret of secrets) expect(text).not.toContain(secret);
  });
});
