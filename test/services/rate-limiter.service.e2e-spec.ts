import type { ExecutionContext } from '@nestjs/common';
import type { ThrottlerOptions } from '@nestjs/throttler';
import type { TestingModule } from '@nestjs/testing';
import type { Request } from 'express';
import { createHash, randomUUID } from 'node:crypto';
import { IncomingMessage, ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { API_KEY_CACHE_MS, ApiKeysService } from '../../src/api-keys/api-keys.service';
import { Public } from '../../src/common/auth/auth.decorators';
import type { UserCaller } from '../../src/common/auth/caller';
import { AppError } from '../../src/common/errors/app-error';
import { Clock, ManualClock } from '../../src/common/time/clock';
import { Database } from '../../src/database/database';
import { sql } from '../../src/database/sql';
import {
  BucketResolver,
  bucketKey,
  ORG_POLICY_CACHE_MS,
} from '../../src/rate-limit/bucket-resolver.service';
import { RateLimitModule } from '../../src/rate-limit/rate-limit.module';
import { RateLimiter } from '../../src/rate-limit/rate-limiter.service';
import {
  BUCKET_KEPT_MS,
  type BucketPolicy,
  policyOf,
  throttlerLimits,
  type TokenBucketRecord,
} from '../../src/rate-limit/token-bucket';
import { TokenBucketStorage } from '../../src/rate-limit/token-bucket.storage';
import { REDIS_CLIENT, type RedisClient } from '../../src/redis/redis.module';
import { Factory } from '../support/factory';
import { moduleAlone } from '../support/module-alone';
import { SHARED_REDIS_URL, sharedRedisAnswers } from '../support/redis-server';

const redisAvailable = sharedRedisAnswers('rate-limiter spec', 'the Redis tests are');
// Skipped only on a developer's machine without Redis: under CI they run, and fail.
const withRedis = redisAvailable || process.env.CI ? describe : describe.skip;

/** Small, distinct sizes, so a bucket's size in a decision names the bucket that made it. */
const SIZES = {
  RATE_LIMIT_ENABLED: 'true',
  RATE_LIMIT_ORG_RPS: '2',
  RATE_LIMIT_ORG_BURST: '5',
  RATE_LIMIT_IP_RPS: '4',
  RATE_LIMIT_IP_BURST: '8',
  RATE_LIMIT_AUTH_RPS: '0.2',
  RATE_LIMIT_AUTH_BURST: '3',
};
const ORG = { rps: 2, burst: 5 };
const IP = { rps: 4, burst: 8 };
const AUTH = { rps: 0.2, burst: 3 };

const CLIENT = '203.0.113.7';

/** Stand-ins for controllers' handlers: the resolver reads @Public() from them. */
class Routes {
  @Public()
  changelog(): void {}

  apiKeys(): void {}
}
const PUBLIC_ROUTE = Routes.prototype.changelog;
const PRIVATE_ROUTE = Routes.prototype.apiKeys;

interface RequestShape {
  method?: string;
  path?: string;
  authorization?: string;
  body?: unknown;
  ip?: string;
  handler?: () => void;
  /** The route template Express matched (`request.route.path`), when one did. */
  route?: string;
}

/** An HTTP request as the guard sees it, without a server: what the resolver reads of it. */
function contextOf(shape: RequestShape = {}): ExecutionContext {
  const request = {
    method: shape.method ?? 'GET',
    path: shape.path ?? '/v1/api-keys',
    headers: shape.authorization === undefined ? {} : { authorization: shape.authorization },
    body: shape.body,
    ip: shape.ip ?? CLIENT,
    socket: { remoteAddress: shape.ip ?? CLIENT },
    route: shape.route === undefined ? undefined : { path: shape.route },
  };
  const handler = shape.handler ?? PRIVATE_ROUTE;
  return {
    switchToHttp: () => ({
      getRequest: () => request,
      getResponse: () => ({}),
      getNext: () => undefined,
    }),
    getHandler: () => handler,
    getClass: () => Routes,
    getType: () => 'http',
    getArgs: () => [request],
    getArgByIndex: () => request,
    switchToRpc: () => {
      throw new Error('http only');
    },
    switchToWs: () => {
      throw new Error('http only');
    },
  } as unknown as ExecutionContext;
}

/** A bucket a request draws from: its storage key and size, in the order the guard draws. */
interface DrawnBucket {
  key: string;
  policy: BucketPolicy;
}

/**
 * The buckets a request draws from, as RateLimitGuard asks BucketResolver's throttlers: each one
 * not skipped, with its tracker (the client address unless it names its own; '' takes nothing).
 */
async function bucketsDrawnBy(
  resolver: BucketResolver,
  context: ExecutionContext,
): Promise<DrawnBucket[]> {
  const request = context.switchToHttp().getRequest<Request>();
  const drawn: DrawnBucket[] = [];
  for (const throttler of resolver.throttlers()) {
    const name = throttler.name!;
    if (throttler.skipIf?.(context)) continue;
    const tracker = throttler.getTracker
      ? await throttler.getTracker(request, context)
      : BucketResolver.clientIp(request);
    if (tracker === '') continue;
    const value = async (option: ThrottlerOptions['limit']) =>
      typeof option === 'function' ? await option(context) : option;
    const limit = await value(throttler.limit);
    const ttl = await value(throttler.ttl);
    drawn.push({ key: bucketKey(name, tracker), policy: policyOf(name, limit, ttl) });
  }
  return drawn;
}

/** Takes a token from each bucket in turn, as the guard does: stops at the first refusal. */
async function admit(storage: TokenBucketStorage, buckets: DrawnBucket[]): Promise<boolean> {
  for (const { key, policy } of buckets) {
    const { limit, ttl } = throttlerLimits(policy);
    if ((await storage.increment(key, ttl, limit, ttl, policy.name)).isBlocked) return false;
  }
  return true;
}

function take(
  storage: TokenBucketStorage,
  key: string,
  size: { rps: number; burst: number },
): Promise<TokenBucketRecord> {
  const { limit, ttl } = throttlerLimits(size);
  return storage.increment(key, ttl, limit, ttl, key.split(':')[0]);
}

/** A response without a connection: enough for setHeader, getHeader and headersSent. */
function bareResponse(): ServerResponse {
  return new ServerResponse(new IncomingMessage(new Socket()));
}

/**
 * The rate-limit module alone on a real PostgreSQL, without HTTP ("medium" spec), time a
 * ManualClock: BucketResolver's rules (which buckets a request draws from, sized how, keyed by
 * what: docs/rate-limiting.md), the token buckets of TokenBucketStorage in memory and in the
 * machine's Redis (emptying, refilling, concurrent takes, isolation, two instances sharing one),
 * and RateLimiter's headers and 429. Each request is a plain object handed to the resolver's
 * throttlers as RateLimitGuard does; test/rate-limit.e2e-spec.ts checks the same over HTTP.
 */
describe('Rate limiting (real database, real Redis)', () => {
  const clock = new ManualClock(Date.parse('2031-03-10T09:00:00.000Z'));
  let moduleRef: TestingModule;
  let resolver: BucketResolver;
  let storage: TokenBucketStorage;
  let limiter: RateLimiter;
  let keys: ApiKeysService;
  let database: Database;
  let factory: Factory;

  /** The module on `env`, its Clock the spec's. */
  function rateLimitModule(env: Record<string, string | undefined>): Promise<TestingModule> {
    return moduleAlone([RateLimitModule], { ...SIZES, SMTP_URL: undefined, ...env }, (builder) =>
      builder.overrideProvider(Clock).useValue(clock),
    );
  }

  beforeAll(async () => {
    moduleRef = await rateLimitModule({ REDIS_URL: undefined });
    resolver = moduleRef.get(BucketResolver);
    storage = moduleRef.get(TokenBucketStorage);
    limiter = moduleRef.get(RateLimiter);
    keys = moduleRef.get(ApiKeysService, { strict: false });
    database = moduleRef.get(Database);
    factory = new Factory(database);
  });
  afterAll(() => moduleRef?.close());

  /** A fresh organization and its owner acting for it. */
  async function owner(): Promise<UserCaller> {
    const organizationId = await factory.organization();
    const userId = await factory.member(organizationId, 'owner');
    return { kind: 'user', userId, organizationId, scopes: ['admin'] };
  }

  /** An API key of the owner's organization, as its Authorization header. */
  async function apiKey(
    caller: UserCaller,
    rateLimit: { rps: number; burst: number } | null = null,
  ): Promise<{ id: string; authorization: string }> {
    const created = await keys.create(caller, {
      name: 'rate limiter spec',
      scopes: ['read'],
      rate_limit: rateLimit,
    });
    return { id: created.id, authorization: `Bearer ${created.key}` };
  }

  /** The organization's end_user_rate_limit, as a PATCH of its limits writes it. */
  async function endUserRateLimit(organizationId: string, rps: number, burst: number) {
    await database.count(
      sql`INSERT INTO organization_limits (organization_id, end_user_rps, end_user_burst)
          VALUES (${organizationId}, ${rps}, ${burst})`,
    );
  }

  const drawn = (shape: RequestShape) => bucketsDrawnBy(resolver, contextOf(shape));
  const sized = (name: string, tracker: string, size: { rps: number; burst: number }) => ({
    key: bucketKey(name, tracker),
    policy: { name, ...size },
  });

  describe('BucketResolver: the buckets a request draws from', () => {
    it('public routes and calls without a credential: the address’s ip bucket; the auth routes: its auth bucket only', async () => {
      expect(await drawn({ handler: PUBLIC_ROUTE, path: '/v1/vocabularies/emotions' })).toEqual([
        sized('ip', CLIENT, IP),
      ]);
      expect(await drawn({ path: '/v1/api-keys' })).toEqual([sized('ip', CLIENT, IP)]);
      // Matched as Express routes them: any case, a trailing slash.
      for (const path of ['/v1/auth/login', '/V1/Auth/Login/', '/v1/auth/signup']) {
        expect({
          path,
          drawn: await drawn({ method: 'POST', path, handler: PUBLIC_ROUTE }),
        }).toEqual({ path, drawn: [sized('auth', CLIENT, AUTH)] });
      }
      // A credential on an auth route changes nothing: the auth bucket alone.
      const { authorization } = await apiKey(await owner());
      expect(
        await drawn({ method: 'POST', path: '/v1/auth/resend-verification', authorization }),
      ).toEqual([sized('auth', CLIENT, AUTH)]);
      // Another method on the same path is no auth route.
      expect(await drawn({ method: 'GET', path: '/v1/auth/login', handler: PUBLIC_ROUTE })).toEqual(
        [sized('ip', CLIENT, IP)],
      );
    });

    it('buckets an address as it is: IPv4-mapped as IPv4, IPv6 per /64', async () => {
      const ipOf = async (ip: string) =>
        (await drawn({ ip, handler: PUBLIC_ROUTE })).map((bucket) => bucket.key);
      expect(await ipOf('::ffff:198.51.100.4')).toEqual(['ip:198.51.100.4']);
      const [sameSubscriber] = await ipOf('2001:db8:1:2:aaaa::1');
      expect(await ipOf('2001:db8:1:2:bbbb:cccc:dddd:2')).toEqual([sameSubscriber]);
      expect(await ipOf('2001:db8:1:3::1')).not.toEqual([sameSubscriber]);
    });

    it('a request no guard charged is charged to the address: the auth bucket on its paths, else ip', () => {
      const request = (method: string, path: string) =>
        contextOf({ method, path }).switchToHttp().getRequest<Request>();
      expect(resolver.forUnrouted(request('POST', '/v1/auth/forgot-password/'))).toEqual({
        name: 'auth',
        tracker: CLIENT,
        ...throttlerLimits(AUTH),
      });
      expect(resolver.forUnrouted(request('GET', '/no/such/route'))).toEqual({
        name: 'ip',
        tracker: CLIENT,
        ...throttlerLimits(IP),
      });
    });

    it('a valid key draws its organization’s bucket; the address pays only for the lookup', async () => {
      const caller = await owner();
      const { authorization } = await apiKey(caller);
      const org = sized('org', caller.organizationId, ORG);
      // Made on this instance: known, no lookup.
      expect(await drawn({ authorization })).toEqual([org]);
      // Once this instance's copy has expired, the address pays for the lookup first.
      clock.advance(API_KEY_CACHE_MS);
      expect(await drawn({ authorization })).toEqual([sized('ip', CLIENT, IP), org]);
      expect(await drawn({ authorization })).toEqual([org]);
      // Another key of the same organization: the same bucket.
      const second = await apiKey(caller);
      expect((await drawn({ authorization: second.authorization })).at(-1)).toEqual(org);
    });

    it('sizes an organization’s bucket by its own columns, seen by this instance within 10 s', async () => {
      const caller = await owner();
      const { authorization } = await apiKey(caller);
      const orgBucket = async () => (await drawn({ authorization })).at(-1);
      expect(await orgBucket()).toEqual(sized('org', caller.organizationId, ORG));

      await database.count(
        sql`UPDATE organizations SET rate_limit_rps = 0.5, rate_limit_burst = 3
             WHERE id = ${caller.organizationId}`,
      );
      clock.advance(ORG_POLICY_CACHE_MS - 1);
      expect(await orgBucket()).toEqual(sized('org', caller.organizationId, ORG));
      clock.advance(1);
      expect(await orgBucket()).toEqual(
        sized('org', caller.organizationId, { rps: 0.5, burst: 3 }),
      );

      // One column set: the other keeps the default.
      await database.count(
        sql`UPDATE organizations SET rate_limit_rps = NULL WHERE id = ${caller.organizationId}`,
      );
      clock.advance(ORG_POLICY_CACHE_MS);
      expect(await orgBucket()).toEqual(sized('org', caller.organizationId, { rps: 2, burst: 3 }));
    });

    it('a bad credential names no organization: an unknown key costs its address one lookup, a malformed one nothing', async () => {
      const caller = await owner();
      const { id, authorization } = await apiKey(caller);
      // Deleted, and forgotten by this instance: well-formed, unknown.
      await database.count(sql`DELETE FROM api_keys WHERE id = ${id}`);
      clock.advance(API_KEY_CACHE_MS);
      expect(await drawn({ authorization })).toEqual([sized('ip', CLIENT, IP)]);
      // Remembered as unknown: no more lookups to pay for, and still no organization.
      expect(await drawn({ authorization })).toEqual([]);
      // A checksum that does not match: never looked up.
      const malformed = `${authorization.slice(0, -1)}${authorization.endsWith('A') ? 'B' : 'A'}`;
      expect(await drawn({ authorization: malformed })).toEqual([]);
    });

    it('a key with its own rate_limit also draws its key bucket, which a rolled key takes over', async () => {
      const caller = await owner();
      const partner = await apiKey(caller, { rps: 0.1, burst: 2 });
      const buckets = await drawn({ authorization: partner.authorization });
      expect(buckets.map((bucket) => bucket.policy)).toEqual([
        { name: 'org', ...ORG },
        { name: 'key', rps: 0.1, burst: 2 },
      ]);
      const keyBucket = buckets[1].key;
      expect(keyBucket).toMatch(/^key:/);

      const rolled = await keys.roll(caller, partner.id, 600);
      expect((await drawn({ authorization: `Bearer ${rolled.key}` })).at(-1)).toEqual(buckets[1]);
      // The old key, still working, draws it too.
      expect((await drawn({ authorization: partner.authorization })).at(-1)).toEqual(buckets[1]);
      // Another key with a rate_limit of the same size: a bucket of its own.
      const other = await apiKey(caller, { rps: 0.1, burst: 2 });
      const otherBucket = (await drawn({ authorization: other.authorization })).at(-1);
      expect(otherBucket?.key).toMatch(/^key:/);
      expect(otherBucket?.key).not.toBe(keyBucket);
    });

    it('an end user’s bucket on POST /v1/respond, per organization and user_id, once the organization sets one', async () => {
      const caller = await owner();
      await endUserRateLimit(caller.organizationId, 1, 2);
      const { authorization } = await apiKey(caller);
      // Express matches `/V1/Respond/` to the route too: the resolver reads the route it matched.
      const respond = (body: unknown, method = 'POST', path = '/v1/respond') =>
        drawn({ method, path, route: '/v1/respond', authorization, body });
      const digest = createHash('sha256').update('ada@example.com').digest('base64url');

      const buckets = await respond({ user_id: 'ada@example.com', message: 'hi' });
      expect(buckets.slice(-2)).toEqual([
        sized('org', caller.organizationId, ORG),
        sized('end_user', `${caller.organizationId}:${digest}`, { rps: 1, burst: 2 }),
      ]);
      // The key names no user_id (it would sit in Redis); '@' and '.' appear in no UUID or digest.
      expect(buckets.at(-1)?.key).not.toContain('ada@example.com');
      expect(
        (await respond({ user_id: 'ada@example.com' }, 'POST', '/V1/Respond/')).at(-1),
      ).toEqual(buckets.at(-1));
      expect((await respond({ user_id: 'bob' })).at(-1)?.key).not.toBe(buckets.at(-1)?.key);

      // No usable user_id (validation refuses it next), or another route: no end user's bucket.
      for (const body of [{}, { user_id: '' }, { user_id: 42 }, { user_id: 'x'.repeat(257) }]) {
        expect((await respond(body)).map((bucket) => bucket.policy.name)).toEqual(['org']);
      }
      expect((await respond({ user_id: 'x'.repeat(256) })).at(-1)?.policy.name).toBe('end_user');
      expect(
        (await respond({ user_id: 'ada@example.com' }, 'GET')).map((b) => b.policy.name),
      ).toEqual(['org']);

      // The same user_id in another organization: that organization's bucket, sized by it.
      const elsewhere = await owner();
      await endUserRateLimit(elsewhere.organizationId, 3, 6);
      const theirs = await apiKey(elsewhere);
      const theirBuckets = await drawn({
        method: 'POST',
        path: '/v1/respond',
        route: '/v1/respond',
        authorization: theirs.authorization,
        body: { user_id: 'ada@example.com' },
      });
      expect(theirBuckets.at(-1)).toEqual(
        sized('end_user', `${elsewhere.organizationId}:${digest}`, { rps: 3, burst: 6 }),
      );

      // An organization that set no end_user_rate_limit: none.
      const unlimited = await owner();
      const unlimitedKey = await apiKey(unlimited);
      expect(
        (
          await drawn({
            method: 'POST',
            path: '/v1/respond',
            route: '/v1/respond',
            authorization: unlimitedKey.authorization,
            body: { user_id: 'ada@example.com' },
          })
        ).map((bucket) => bucket.policy.name),
      ).toEqual(['org']);
    });
  });

  /**
   * The same rules on both stores. Time: the ManualClock for memory; Redis refills on its own
   * clock (TIME in the script), so there a bucket is aged instead: its stored updated_at moved
   * back by the time to pass, which is what the script reads as elapsed time.
   */
  const stores: Array<[string, boolean]> = [
    ['in memory', true],
    ['in Redis', redisAvailable || !!process.env.CI],
  ];
  describe.each(stores)('TokenBucketStorage %s', (store, runs) => {
    const onRedis = store === 'in Redis';
    const prefix = `spec-rate-limiter-${randomUUID()}:`;
    let instance: TestingModule;
    let buckets: TokenBucketStorage;
    let redis: RedisClient;

    beforeAll(async () => {
      if (!runs) return;
      instance = onRedis
        ? await rateLimitModule({
            REDIS_URL: SHARED_REDIS_URL,
            // A prefix of this run's own: the machine's Redis is shared and never flushed.
            RATE_LIMIT_REDIS_PREFIX: prefix,
            // Sharing is under test, not the fail-open to memory on a slow answer.
            RATE_LIMIT_REDIS_TIMEOUT_MS: '5000',
          })
        : moduleRef;
      buckets = instance.get(TokenBucketStorage);
      redis = instance.get<RedisClient>(REDIS_CLIENT);
    });
    afterAll(async () => {
      if (onRedis && instance) {
        const stored = await redis!.keys(`${prefix}*`);
        if (stored.length > 0) await redis!.del(...stored);
        await instance.close();
      }
    });
    const itRuns = runs ? it : it.skip;

    /** Lets `ms` pass for the bucket `key`. */
    async function elapse(key: string, ms: number): Promise<void> {
      if (!onRedis) {
        clock.advance(ms);
        return;
      }
      const updatedAt = Number(await redis!.hget(prefix + key, 'updated_at'));
      await redis!.hset(prefix + key, 'updated_at', String(updatedAt - ms));
    }

    itRuns('reports where it keeps the buckets', () => {
      expect(buckets.status()).toEqual({ store: onRedis ? 'redis' : 'memory', degraded: false });
    });

    itRuns(
      'empties after its burst, refills rps tokens a second, never beyond the burst',
      async () => {
        const key = bucketKey('org', randomUUID());
        const size = { rps: 2, burst: 5 };
        const first = await Promise.all([1, 2, 3, 4, 5].map(async () => take(buckets, key, size)));
        expect(first.map((record) => record.isBlocked)).toEqual([
          false,
          false,
          false,
          false,
          false,
        ]);
        const refused = await take(buckets, key, size);
        expect(refused).toMatchObject({ isBlocked: true, totalHits: 5, timeToBlockExpire: 1 });
        expect(refused.tokens).toBeLessThan(1);

        // A token every 500 ms: not at 400 (Redis's own clock moves a little meanwhile), at 500.
        await elapse(key, 400);
        expect((await take(buckets, key, size)).isBlocked).toBe(true);
        await elapse(key, 100);
        expect((await take(buckets, key, size)).isBlocked).toBe(false);
        expect((await take(buckets, key, size)).isBlocked).toBe(true);

        // An hour's rest fills it to the burst, no further.
        await elapse(key, 3_600_000);
        const rested = await take(buckets, key, size);
        expect(Math.floor(rested.tokens)).toBe(size.burst - 1);
        expect(rested.totalHits).toBe(1);
        if (onRedis) {
          // Kept under the run's prefix and the bucket's own name, expiring once full again.
          expect(await redis!.keys(`${prefix}${key}`)).toEqual([`${prefix}${key}`]);
          const ttl = await redis!.pttl(prefix + key);
          expect(ttl).toBeGreaterThan(0);
          expect(ttl).toBeLessThanOrEqual(1_000);
        }
      },
    );

    itRuns('concurrent takes never hand out more tokens than the bucket holds', async () => {
      const key = bucketKey('org', randomUUID());
      // Refills one token in 100 s: none comes back during the race.
      const size = { rps: 0.01, burst: 7 };
      const records = await Promise.all(Array.from({ length: 40 }, () => take(buckets, key, size)));
      expect(records.filter((record) => !record.isBlocked)).toHaveLength(size.burst);
      expect(Math.max(...records.map((record) => record.totalHits))).toBe(size.burst);
      for (const record of records) expect(record.tokens).toBeGreaterThanOrEqual(0);
    });

    itRuns(
      'organizations draw from their own buckets: one emptied leaves the others full',
      async () => {
        const [a, b] = [await owner(), await owner()];
        const [aKey, aOtherKey, bKey] = [await apiKey(a), await apiKey(a), await apiKey(b)];
        const orgBucketOf = async (authorization: string) =>
          (await bucketsDrawnBy(resolver, contextOf({ authorization }))).filter(
            (bucket) => bucket.policy.name === 'org',
          );
        const requestOf = async (authorization: string) =>
          admit(buckets, await orgBucketOf(authorization));

        const admitted: boolean[] = [];
        for (let i = 0; i < ORG.burst + 2; i++) admitted.push(await requestOf(aKey.authorization));
        expect(admitted).toEqual([true, true, true, true, true, false, false]);
        // Per organization, not per key: A's other key finds the same empty bucket.
        expect(await requestOf(aOtherKey.authorization)).toBe(false);
        // B's bucket is untouched, concurrently drawn too.
        const bAdmitted = await Promise.all(
          Array.from({ length: ORG.burst + 3 }, () => requestOf(bKey.authorization)),
        );
        expect(bAdmitted.filter(Boolean)).toHaveLength(ORG.burst);
      },
    );
  });

  withRedis('two module instances on one Redis', () => {
    const prefix = `spec-rate-limiter-${randomUUID()}:`;
    let first: TestingModule;
    let second: TestingModule;

    beforeAll(async () => {
      const env = {
        REDIS_URL: SHARED_REDIS_URL,
        RATE_LIMIT_REDIS_PREFIX: prefix,
        RATE_LIMIT_REDIS_TIMEOUT_MS: '5000',
      };
      first = await rateLimitModule(env);
      second = await rateLimitModule(env);
    });
    afterAll(async () => {
      const redis = first?.get<RedisClient>(REDIS_CLIENT);
      const stored = (await redis?.keys(`${prefix}*`)) ?? [];
      if (stored.length > 0) await redis!.del(...stored);
      await first?.close();
      await second?.close();
    });

    it('share one bucket: one burst between them, taken in turn or all at once', async () => {
      const instances = [first.get(TokenBucketStorage), second.get(TokenBucketStorage)];
      const size = { rps: 0.01, burst: 5 };

      const inTurn = bucketKey('org', randomUUID());
      const sequential: boolean[] = [];
      for (let i = 0; i < 8; i++) {
        sequential.push(!(await take(instances[i % 2], inTurn, size)).isBlocked);
      }
      expect(sequential).toEqual([true, true, true, true, true, false, false, false]);

      const atOnce = bucketKey('org', randomUUID());
      const concurrent = await Promise.all(
        Array.from({ length: 24 }, (_, i) => take(instances[i % 2], atOnce, size)),
      );
      expect(concurrent.filter((record) => !record.isBlocked)).toHaveLength(size.burst);
    });

    it('keeps the slowest bucket a client may set in Redis for an hour unused: the store stays healthy', async () => {
      const instance = first.get(TokenBucketStorage);
      const redis = first.get<RedisClient>(REDIS_CLIENT);
      if (!redis) throw new Error('this module has no Redis client');
      for (const rps of [1e-13, 5e-324]) {
        const key = bucketKey('end_user', randomUUID());
        const slowest = { rps, burst: 1 };
        expect((await take(instance, key, slowest)).isBlocked).toBe(false);
        expect((await take(instance, key, slowest)).isBlocked).toBe(true);
        expect(instance.status()).toEqual({ store: 'redis', degraded: false });
        // Kept an hour after its last take, not until it would be full (about 31 years before,
        // a key per end user: found by review).
        const kept = await redis.pttl(`${prefix}${key}`);
        expect(kept).toBeGreaterThan(BUCKET_KEPT_MS - 60_000);
        expect(kept).toBeLessThanOrEqual(BUCKET_KEPT_MS);
      }
    });

    it('instances without Redis keep their own buckets: each lets its own burst through', async () => {
      const other = await rateLimitModule({ REDIS_URL: undefined });
      try {
        const size = { rps: 0.01, burst: 3 };
        const key = bucketKey('ip', '198.51.100.9');
        const allowed = async (instance: TokenBucketStorage) => {
          const records = await Promise.all([1, 2, 3, 4].map(() => take(instance, key, size)));
          return records.filter((record) => !record.isBlocked).length;
        };
        expect(await allowed(storage)).toBe(3);
        expect(await allowed(other.get(TokenBucketStorage))).toBe(3);
      } finally {
        await other.close();
      }
    });
  });

  describe('RateLimiter', () => {
    it('writes the contract’s headers of a decision, timed by the injected clock', async () => {
      const key = bucketKey('org', randomUUID());
      const { limit, ttl } = throttlerLimits(ORG);
      const response = bareResponse();
      limiter.report(response, 'org', limit, ttl, await take(storage, key, ORG));
      const now = clock.nowMs();
      expect(response.getHeaders()).toEqual({
        'x-ratelimit-limit': '2',
        'x-ratelimit-remaining': '4',
        'x-ratelimit-reset': new Date(now + 500).toISOString(),
        'ratelimit-policy': '"org";q=5;w=3',
        ratelimit: '"org";r=4;t=1',
      });
      expect(RateLimiter.hasHeaders(response)).toBe(true);
      expect(RateLimiter.hasHeaders(bareResponse())).toBe(false);

      for (let i = 0; i < 4; i++) await take(storage, key, ORG);
      const refused = bareResponse();
      limiter.report(refused, 'org', limit, ttl, await take(storage, key, ORG));
      expect(refused.getHeaders()).toMatchObject({
        'x-ratelimit-remaining': '0',
        'x-ratelimit-reset': new Date(now + 2_500).toISOString(),
        'retry-after': '1',
      });
    });

    it('a narrower bucket’s headers replace the organization’s only when it binds sooner, or refuses', async () => {
      const org = throttlerLimits(ORG);
      const keySize = { rps: 0.5, burst: 3 };
      const keyLimits = throttlerLimits(keySize);
      const orgBucket = bucketKey('org', randomUUID());
      const keyBucket = bucketKey('key', randomUUID());

      // Org 4 left, key 2 left: the key binds next.
      const tighter = bareResponse();
      limiter.report(tighter, 'org', org.limit, org.ttl, await take(storage, orgBucket, ORG));
      limiter.report(
        tighter,
        'key',
        keyLimits.limit,
        keyLimits.ttl,
        await take(storage, keyBucket, keySize),
        true,
      );
      expect(tighter.getHeader('ratelimit-policy')).toBe('"key";q=3;w=6');
      expect(tighter.getHeader('x-ratelimit-remaining')).toBe('2');

      // Org 0 left (after 3 more), key 1 left: the organization's stay.
      for (let i = 0; i < 3; i++) await take(storage, orgBucket, ORG);
      const looser = bareResponse();
      limiter.report(looser, 'org', org.limit, org.ttl, await take(storage, orgBucket, ORG));
      limiter.report(
        looser,
        'key',
        keyLimits.limit,
        keyLimits.ttl,
        await take(storage, keyBucket, keySize),
        true,
      );
      expect(looser.getHeader('ratelimit-policy')).toBe('"org";q=5;w=3');
      expect(looser.getHeader('x-ratelimit-remaining')).toBe('0');

      // The key's bucket refuses (its last token gone): its headers, though the organization's
      // fresh bucket has more left.
      await take(storage, keyBucket, keySize);
      const refusedByKey = bareResponse();
      const fullOrg = await take(storage, bucketKey('org', randomUUID()), ORG);
      limiter.report(refusedByKey, 'org', org.limit, org.ttl, fullOrg);
      limiter.report(
        refusedByKey,
        'key',
        keyLimits.limit,
        keyLimits.ttl,
        await take(storage, keyBucket, keySize),
        true,
      );
      expect(refusedByKey.getHeaders()).toMatchObject({
        'ratelimit-policy': '"key";q=3;w=6',
        'x-ratelimit-remaining': '0',
        'retry-after': expect.stringMatching(/^\d+$/),
      });
    });

    it('answers 429 rate_limited with Retry-After in whole seconds, never below 1', () => {
      for (const [seconds, header] of [
        [0, '1'],
        [1, '1'],
        [7, '7'],
      ] as const) {
        const error = RateLimiter.rateLimited(seconds);
        expect(error).toBeInstanceOf(AppError);
        expect({ code: error.code, status: error.status, headers: error.headers }).toEqual({
          code: 'rate_limited',
          status: 429,
          headers: { 'Retry-After': header },
        });
      }
    });
  });
});
