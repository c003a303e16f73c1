import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { before, describe, it } from 'node:test';
import type { Fetch } from '@personality-api/client';
import { newTenant, uniqueUserId, type Tenant } from './support.js';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

interface Attempt {
  at: number;
  method: string;
  key: string | null;
}

/** A fetch that records each attempt and lets `script` answer it (undefined: the service does). */
function scripted(
  script: (attempt: number, request: Request) => Response | 'fail after sending' | undefined,
): { fetch: Fetch; attempts: Attempt[] } {
  const attempts: Attempt[] = [];
  const fetchFn: Fetch = async (request) => {
    attempts.push({
      at: Date.now(),
      method: request.method,
      key: request.headers.get('idempotency-key'),
    });
    const scriptedAnswer = script(attempts.length, request);
    if (scriptedAnswer instanceof Response) return scriptedAnswer;
    const response = await fetch(request);
    if (scriptedAnswer === 'fail after sending') {
      // The service did the work; the answer is lost on the way back.
      await response.arrayBuffer();
      throw new TypeError('fetch failed');
    }
    return response;
  };
  return { fetch: fetchFn, attempts };
}

const envelope = (status: number, code: string) =>
  JSON.stringify({
    error: { status, code, message: code, request_id: '01JD0000000000000000000000' },
  });

describe('retries and idempotency keys', () => {
  let tenant: Tenant;
  before(async () => {
    tenant = await newTenant();
  });

  it('a POST whose answer was lost is retried with the same key: the service ran it once', async () => {
    const { fetch, attempts } = scripted((n) => (n === 1 ? 'fail after sending' : undefined));
    const userId = uniqueUserId('lost');
    const { data, response } = await tenant
      .withFetch(fetch)
      .POST('/v1/end-users', { body: { user_id: userId } });
    assert.equal(attempts.length, 2);
    assert.match(attempts[0]!.key ?? '', UUID);
    assert.equal(attempts[1]!.key, attempts[0]!.key);
    // The first attempt's stored answer: 201, replayed (a second creation would answer 200).
    assert.equal(response.status, 201);
    assert.equal(response.headers.get('idempotent-replayed'), 'true');
    assert.equal(data?.user_id, userId);
    const list = await tenant.api.GET('/v1/end-users', { params: { query: { limit: 100 } } });
    assert.equal(list.data?.data.filter((user) => user.user_id === userId).length, 1);
  });

  it('a 503 is retried with the same key; each logical POST has a key of its own', async () => {
    const { fetch, attempts } = scripted((n) =>
      n === 1 ? new Response(envelope(503, 'unavailable'), { status: 503 }) : undefined,
    );
    const api = tenant.withFetch(fetch);
    const first = await api.POST('/v1/end-users', { body: { user_id: uniqueUserId('a') } });
    assert.equal(first.response.status, 201);
    assert.equal(first.response.headers.get('idempotent-replayed'), null);
    await api.POST('/v1/end-users', { body: { user_id: uniqueUserId('b') } });
    assert.equal(attempts.length, 3);
    assert.equal(attempts[1]!.key, attempts[0]!.key);
    assert.notEqual(attempts[2]!.key, attempts[0]!.key);
    assert.match(attempts[2]!.key ?? '', UUID);
  });

  it('a key given by the caller is sent as is, by the typed calls and by respond', async () => {
    const { fetch, attempts } = scripted(() => undefined);
    const api = tenant.withFetch(fetch);
    const key = `order-${randomUUID()}`;
    const body = { user_id: uniqueUserId('keyed') };
    const first = await api.POST('/v1/end-users', {
      body,
      params: { header: { 'Idempotency-Key': key } },
    });
    const again = await api.POST('/v1/end-users', {
      body,
      params: { header: { 'Idempotency-Key': key } },
    });
    assert.deepEqual(
      attempts.map((attempt) => attempt.key),
      [key, key],
    );
    assert.equal(first.response.status, 201);
    assert.equal(again.response.status, 201);
    assert.equal(again.response.headers.get('idempotent-replayed'), 'true');
    // GETs carry no key.
    await api.GET('/v1/end-users');
    assert.equal(attempts.at(-1)?.key, null);
  });

  it('honours Retry-After on a 429', async () => {
    const { fetch, attempts } = scripted((n) =>
      n === 1
        ? new Response(envelope(429, 'rate_limited'), {
            status: 429,
            headers: { 'retry-after': '1', 'content-type': 'application/json' },
          })
        : undefined,
    );
    const { response } = await tenant.withFetch(fetch).GET('/v1/end-users');
    assert.equal(response.status, 200);
    assert.equal(attempts.length, 2);
    const waited = attempts[1]!.at - attempts[0]!.at;
    assert.ok(waited >= 1_000 && waited < 2_500, `waited ${waited} ms`);
  });

  it('stops after maxRetries and answers the last response; a far Retry-After is not waited for', async () => {
    const unavailable = () =>
      new Response(envelope(503, 'unavailable'), { status: 503, headers: { 'retry-after': '0' } });
    const always = scripted(unavailable);
    const { error, response } = await tenant.withFetch(always.fetch).GET('/v1/end-users');
    assert.equal(always.attempts.length, 3); // the default: 2 retries
    assert.equal(response.status, 503);
    assert.equal(error?.error.code, 'unavailable');

    const once = scripted(unavailable);
    await tenant.withFetch(once.fetch, 0).GET('/v1/end-users');
    assert.equal(once.attempts.length, 1);

    const far = scripted(
      () =>
        new Response(envelope(429, 'rate_limited'), {
          status: 429,
          headers: { 'retry-after': '3600' },
        }),
    );
    const started = Date.now();
    const limited = await tenant.withFetch(far.fetch).GET('/v1/end-users');
    assert.equal(limited.response.status, 429);
    assert.equal(far.attempts.length, 1);
    assert.ok(Date.now() - started < 1_000);
  });

  it('retries network errors, then throws the last one; 4xx answers are not retried', async () => {
    const down = scripted(() => {
      throw new TypeError('fetch failed');
    });
    await assert.rejects(tenant.withFetch(down.fetch, 1).GET('/v1/end-users'), TypeError);
    assert.equal(down.attempts.length, 2);

    const counted = scripted(() => undefined);
    const missing = await tenant.withFetch(counted.fetch).GET('/v1/end-users/{user_id}', {
      params: { path: { user_id: uniqueUserId('none') } },
    });
    assert.equal(missing.response.status, 404);
    assert.equal(counted.attempts.length, 1);
  });

  it('a sign-up whose answer was lost is not sent again: the service keeps no key there (review)', async () => {
    const { fetch, attempts } = scripted((n) => (n === 1 ? 'fail after sending' : undefined));
    const email = `lost-${randomUUID()}@example.test`;
    await assert.rejects(
      tenant.withFetch(fetch).POST('/v1/auth/signup', {
        body: { email, password: `a long password ${randomUUID()}` },
      }),
      TypeError,
    );
    // Sent again, it would have answered 409 email_taken for the account it made.
    assert.equal(attempts.length, 1);
    // A 503 did nothing: that one is sent again.
    const refused = scripted((n) =>
      n === 1
        ? new Response(envelope(503, 'service_unavailable'), {
            status: 503,
            headers: { 'retry-after': '0' },
          })
        : undefined,
    );
    const created = await tenant.withFetch(refused.fetch).POST('/v1/auth/signup', {
      body: { email: `refused-${email}`, password: `a long password ${randomUUID()}` },
    });
    assert.equal(created.response.status, 201);
    assert.equal(refused.attempts.length, 2);
  });

  it('a 409 idempotency_key_in_progress is retried with the key until its first answer is stored', async () => {
    const { fetch, attempts } = scripted((n) =>
      n === 1
        ? new Response(envelope(409, 'idempotency_key_in_progress'), { status: 409 })
        : undefined,
    );
    const userId = uniqueUserId('busy');
    const { response } = await tenant
      .withFetch(fetch)
      .POST('/v1/end-users', { body: { user_id: userId } });
    assert.equal(response.status, 201);
    assert.equal(attempts.length, 2);
    assert.equal(attempts[1]!.key, attempts[0]!.key);
    // Another 409 is the caller's.
    const other = scripted(() => new Response(envelope(409, 'end_user_exists'), { status: 409 }));
    const conflict = await tenant
      .withFetch(other.fetch)
      .POST('/v1/end-users', { body: { user_id: userId } });
    assert.equal(conflict.response.status, 409);
    assert.equal(other.attempts.length, 1);
  });

  it('an aborted signal ends a wait for Retry-After at once', async () => {
    const waiting = scripted(
      () =>
        new Response(envelope(503, 'unavailable'), {
          status: 503,
          headers: { 'retry-after': '30' },
        }),
    );
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 100);
    const started = Date.now();
    await assert.rejects(
      tenant.withFetch(waiting.fetch).GET('/v1/end-users', { signal: controller.signal }),
      { name: 'AbortError' },
    );
    assert.ok(Date.now() - started < 2_000);
    assert.equal(waiting.attempts.length, 1);
  });
});
