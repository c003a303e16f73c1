import fc from 'fast-check';
import { randomUUID } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import type { AddressInfo } from 'node:net';
import { clonePersonality } from './support/data-plane';
import { FakeStripe } from './support/fake-stripe';
import {
  bodyValue,
  encodeUtf16,
  type Labelled,
  pathSegment,
  queryShapes,
  queryValue,
  SWEEP_BODY_VALUES,
  SWEEP_PATH_SEGMENTS,
  SWEEP_QUERY_VALUES,
  SWEEP_WHOLE_BODIES,
  wholeBody,
} from './support/hostile-values';
import { createApiKey, signUp } from './support/identity';
import { createTestApp, type TestApp } from './support/test-app';
import { UNTHROTTLED } from './support/unthrottled';

/**
 * Property-based fuzzing of every operation in the OpenAPI document: path parameters, query
 * parameters and JSON bodies get hostile values (wrong types, deep nesting, NUL, lone
 * surrogates, huge numbers, long strings, unknown and prototype keys, bad cursors and months,
 * bodies that are not objects), sent with an owner's access token or an admin API key so they get
 * past authentication. Whatever is sent: no 5xx, an X-Request-Id on every response, the error
 * envelope on every 4xx, and the process still answers afterwards.
 *
 * Two passes. A sweep sends every catalogued hostile value to every body field, path parameter
 * and query parameter of every operation (and every hostile whole body), the rest of the request
 * valid, so each value reaches each slot on every run. Then fast-check combines them at random:
 * a fixed seed plus a random one (printed; FUZZ_SEED replays it), FUZZ_RUNS cases per operation
 * and seed. fast-check serves as a seeded generator (fc.sample): every case is recorded rather
 * than stopping at the first failure, so one red run lists every input that answered 5xx.
 *
 * No operation is left out. Those whose side effects would end the run get targets of their own
 * instead: DELETE /v1/api-keys/{id} only ever sees a throwaway key's id (never the fuzzing key's),
 * PATCH and DELETE of personalities and end users their own records. Billing runs against the
 * fake Stripe; the rate limiter is out of the way (UNTHROTTLED).
 */

const FIXED_SEED = 20261123;
const RUNS_PER_OPERATION = Number(process.env.FUZZ_RUNS ?? 20);
const REQUEST_TIMEOUT_MS = 15_000;
const CONCURRENCY = 4;

interface Schema {
  $ref?: string;
  type?: string;
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  enum?: unknown[];
  format?: string;
  minLength?: number;
  minimum?: number;
  minItems?: number;
  example?: unknown;
  allOf?: Schema[];
}

interface Parameter {
  name: string;
  in: 'path' | 'query' | 'header';
  schema?: Schema;
}

interface Operation {
  method: string;
  path: string;
  parameters: Parameter[];
  bodySchema?: Schema;
}

interface FuzzRequest {
  credential: 'owner token' | 'admin key' | 'owner token + foreign X-Organization-Id';
  path: string;
  headers: Record<string, string>;
  body?: string;
  label: string;
}

interface Answer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: string;
}

interface Failure {
  operation: string;
  problem: string;
  request: { method: string; path: string; label: string; credential: string; body?: string };
  status: number;
  response: string;
  requestId?: string;
  /** For a 5xx: the error the service logged on the request's line, to point at the cause. */
  logged?: string;
}

const SLOT = '__FUZZ_SLOT__';

describe('Fuzz: hostile values to every operation of the OpenAPI document', () => {
  let t: TestApp;
  let stripe: FakeStripe;
  let base: { host: string; port: number };
  let document: {
    paths: Record<string, Record<string, Record<string, unknown>>>;
    components: { schemas: Record<string, Schema> };
  };
  const ids: Record<string, string> = {};
  const credentials: Record<FuzzRequest['credential'], Record<string, string>> = {
    'owner token': {},
    'admin key': {},
    'owner token + foreign X-Organization-Id': {},
  };

  beforeAll(async () => {
    stripe = await FakeStripe.start();
    t = await createTestApp({
      env: {
        ...UNTHROTTLED,
        STRIPE_SECRET_KEY: 'sk_test_fuzz',
        STRIPE_API_BASE: stripe.baseUrl,
        STRIPE_WEBHOOK_SECRET: 'whsec_fuzz',
      },
    });
    await new Promise<void>((resolve) => t.server.listen(0, '127.0.0.1', resolve));
    base = { host: '127.0.0.1', port: (t.server.address() as AddressInfo).port };

    const owner = await signUp(t);
    const ownerAuth = `Bearer ${owner.accessToken}`;
    const key = await createApiKey(t, owner.accessToken, ['admin'], 'fuzzing key');
    const other = await signUp(t);
    credentials['owner token'] = { authorization: ownerAuth };
    credentials['admin key'] = { authorization: `Bearer ${key}` };
    credentials['owner token + foreign X-Organization-Id'] = {
      authorization: ownerAuth,
      'x-organization-id': other.organizationId,
    };

    // Valid ids for the path parameters, so a share of the cases reach the code behind the
    // lookups. PATCH and DELETE get resources of their own: the fuzzing key is never deleted
    // (that would log the run out), and the personality /v1/respond talks to is never changed, so
    // a bad value a PATCH lets through cannot turn every later respond into a failure that
    // hides the others.
    ids.personality = await clonePersonality(t, ownerAuth);
    ids.personalityToChange = await clonePersonality(t, ownerAuth);
    ids.personalityToDelete = await clonePersonality(t, ownerAuth);
    ids.endUser = `fuzz-${randomUUID()}`;
    ids.endUserToDelete = `fuzz-${randomUUID()}`;
    for (const userId of [ids.endUser, ids.endUserToDelete]) {
      const created = await t
        .http()
        .post('/v1/end-users')
        .set('Authorization', ownerAuth)
        .send({ user_id: userId, metadata: { plan: 'pro' } });
      expect(created.status).toBe(201);
    }
    const throwaway = await t
      .http()
      .post('/v1/api-keys')
      .set('Authorization', ownerAuth)
      .send({ name: 'throwaway', scopes: ['read'] });
    expect(throwaway.status).toBe(201);
    ids.apiKeyToDelete = throwaway.body.id as string;

    const openapi = await t.http().get('/v1/openapi.json');
    expect(openapi.status).toBe(200);
    document = openapi.body;
  });

  afterAll(async () => {
    await t?.close();
    await stripe?.close();
  });

  function resolve(schema: Schema | undefined): Schema {
    let current = schema ?? {};
    for (let hops = 0; current.$ref && hops < 10; hops++) {
      current = document.components.schemas[current.$ref.split('/').pop() as string] ?? {};
    }
    if (current.allOf?.length) return resolve(current.allOf[0]);
    return current;
  }

  /** A value the schema accepts (near enough), for the fields a case leaves alone. */
  function validValue(name: string, schema: Schema | undefined): unknown {
    const resolved = resolve(schema);
    if (name === 'personality_id') return ids.personality;
    if (name === 'user_id') return ids.endUser;
    if (name === 'email') return `fuzz-${randomUUID()}@example.test`;
    if (name === 'password' || name === 'new_password') return `correct horse ${randomUUID()}`;
    if (name === 'expires_at') return new Date(Date.now() + 86_400_000).toISOString();
    if (resolved.enum?.length) return resolved.enum[0];
    if (resolved.example !== undefined) return resolved.example;
    switch (resolved.type) {
      case 'object':
        return Object.fromEntries(
          Object.entries(resolved.properties ?? {}).map(([key, property]) => [
            key,
            validValue(key, property),
          ]),
        );
      case 'array':
        return Array.from({ length: Math.max(resolved.minItems ?? 1, 1) }, () =>
          validValue(name, resolved.items),
        );
      case 'number':
      case 'integer':
        return resolved.minimum ?? 1;
      case 'boolean':
        return true;
      default:
        if (resolved.format === 'uuid') return randomUUID();
        return 'f'.repeat(Math.max(resolved.minLength ?? 1, 4));
    }
  }

  function validPathValue(operation: Operation, name: string): string {
    if (operation.path.startsWith('/v1/personalities/'))
      return (
        { GET: ids.personality, PATCH: ids.personalityToChange }[operation.method] ??
        ids.personalityToDelete
      );
    if (operation.path.startsWith('/v1/end-users/'))
      return operation.method === 'DELETE' ? ids.endUserToDelete : ids.endUser;
    if (operation.path.startsWith('/v1/api-keys/')) return ids.apiKeyToDelete;
    if (name === 'version') return '2.0.0';
    return randomUUID();
  }

  /** Body arbitraries: valid, one field replaced, an unknown or prototype key added, or a whole hostile body. */
  function bodyArbitrary(
    operation: Operation,
  ): fc.Arbitrary<{ label: string; body?: string; contentType?: string }> {
    const bodiless = fc.oneof(
      { weight: 4, arbitrary: fc.constant({ label: 'no body' }) },
      wholeBody.map((body) => ({ label: `body ${body.label}`, body: body.text })),
      fc.constant({ label: 'body {"zzz":1}', body: '{"zzz":1}' }),
    );
    if (!operation.bodySchema)
      return operation.method === 'GET' ? fc.constant({ label: 'no body' }) : bodiless;

    const schema = resolve(operation.bodySchema);
    const fields = Object.keys(schema.properties ?? {});
    const valid = () => validValue('body', schema) as Record<string, unknown>;
    const withSlot = (build: (value: Record<string, unknown>) => void, fragment: string) => {
      const value = valid();
      build(value);
      return JSON.stringify(value).split(JSON.stringify(SLOT)).join(fragment);
    };
    const choices: Array<fc.Arbitrary<{ label: string; body?: string; contentType?: string }>> = [
      fc.constant(null).map(() => ({ label: 'valid body', body: JSON.stringify(valid()) })),
      wholeBody.map((body) => ({ label: `whole body ${body.label}`, body: body.text })),
      wholeBody.map((body) => ({ label: `whole body ${body.label}`, body: body.text })),
      fc
        .tuple(fc.constantFrom('zzz', '__proto__', 'constructor', 'prototype'), bodyValue)
        .map(([key, value]: [string, Labelled]) => {
          const rest = JSON.stringify(valid()).slice(1);
          return {
            label: `extra key ${key} = ${value.label}`,
            body: `{${JSON.stringify(key)}:${value.text}${rest === '}' ? '' : ','}${rest}`,
          };
        }),
      fc
        .constantFrom(
          'text/plain',
          'application/x-www-form-urlencoded',
          'application/json; charset=utf-16le',
        )
        .map((contentType) => ({
          label: `content-type ${contentType}`,
          body: contentType.includes('form') ? 'a=1&__proto__[x]=1' : JSON.stringify(valid()),
          contentType,
        })),
    ];
    // Replacing one field is the likeliest way past validation into the code behind it: weighted up.
    for (let weight = 0; weight < 4 && fields.length > 0; weight++) {
      choices.push(
        fc.tuple(fc.constantFrom(...fields), bodyValue).map(([field, value]) => ({
          label: `field ${field} = ${value.label}`,
          body: withSlot((v) => (v[field] = SLOT), value.text),
        })),
      );
    }
    for (let weight = 0; weight < 2 && fields.includes('metadata'); weight++) {
      choices.push(
        fc
          .tuple(fc.constantFrom('k', '__proto__', 'constructor', 'prototype'), bodyValue)
          .map(([key, value]) => ({
            label: `metadata.${key} = ${value.label}`,
            body: withSlot((v) => (v.metadata = SLOT), `{${JSON.stringify(key)}:${value.text}}`),
          })),
      );
    }
    return fc.oneof(...choices);
  }

  /** Every catalogued value in every slot of the operation, one slot at a time. */
  function sweepRequests(operation: Operation): FuzzRequest[] {
    const pathParams = operation.parameters.filter((p) => p.in === 'path');
    const queryParams = operation.parameters.filter((p) => p.in === 'query');
    const validPath = (replace?: { name: string; text: string }) =>
      pathParams.reduce(
        (path, p) =>
          path.replace(
            `{${p.name}}`,
            replace?.name === p.name
              ? replace.text
              : encodeUtf16(validPathValue(operation, p.name)),
          ),
        operation.path,
      );
    const schema = operation.bodySchema ? resolve(operation.bodySchema) : undefined;
    const validBody = schema ? JSON.stringify(validValue('body', schema)) : undefined;
    const cases: Array<Omit<FuzzRequest, 'credential' | 'headers'> & { contentType?: string }> = [];
    for (const p of pathParams)
      for (const segment of SWEEP_PATH_SEGMENTS)
        cases.push({
          path: validPath({ name: p.name, text: segment.text }),
          body: validBody,
          label: `${p.name} ${segment.label}`,
        });
    for (const p of queryParams)
      for (const value of [
        ...SWEEP_QUERY_VALUES.map((v) => ({ label: v.label, text: `${p.name}=${v.text}` })),
        ...queryShapes(p.name),
      ])
        cases.push({
          path: `${validPath()}?${value.text}`,
          body: validBody,
          label: `?${p.name} ${value.label}`,
        });
    if (schema || operation.method !== 'GET')
      for (const whole of SWEEP_WHOLE_BODIES)
        cases.push({ path: validPath(), body: whole.text, label: `whole body ${whole.label}` });
    for (const field of Object.keys(schema?.properties ?? {})) {
      for (const value of SWEEP_BODY_VALUES) {
        const body = validValue('body', schema) as Record<string, unknown>;
        body[field] = field === 'metadata' ? { k: SLOT } : SLOT;
        cases.push({
          path: validPath(),
          body: JSON.stringify(body).split(JSON.stringify(SLOT)).join(value.text),
          label: `field ${field === 'metadata' ? 'metadata.k' : field} = ${value.label}`,
        });
      }
    }
    return cases.map((c, index) => {
      const credential = index % 2 === 0 ? 'admin key' : 'owner token';
      return {
        credential,
        path: c.path,
        headers: {
          ...credentials[credential],
          ...(c.body !== undefined ? { 'content-type': c.contentType ?? 'application/json' } : {}),
        },
        body: c.body,
        label: c.label,
      };
    });
  }

  function requestArbitrary(operation: Operation): fc.Arbitrary<FuzzRequest> {
    const pathParams = operation.parameters.filter((p) => p.in === 'path');
    const queryParams = operation.parameters.filter((p) => p.in === 'query');
    const headerParams = operation.parameters.filter((p) => p.in === 'header');
    const path = fc
      .tuple(
        ...pathParams.map((p) =>
          fc.oneof(
            fc.constant(null).map(() => ({
              label: `${p.name} valid`,
              text: encodeUtf16(validPathValue(operation, p.name)),
            })),
            pathSegment.map((segment) => ({
              label: `${p.name} ${segment.label}`,
              text: segment.text,
            })),
          ),
        ),
      )
      .map((segments) => {
        let result = operation.path;
        pathParams.forEach(
          (p, index) => (result = result.replace(`{${p.name}}`, segments[index].text)),
        );
        return { path: result, label: segments.map((s) => s.label).join(', ') };
      });
    const query = fc
      .tuple(
        ...queryParams.map((p) =>
          fc.option(
            queryValue(p.name).map((v) => ({ label: `?${p.name} ${v.label}`, text: v.text })),
            {
              freq: 2,
            },
          ),
        ),
        fc.oneof(
          { weight: 4, arbitrary: fc.constant(null) },
          fc.constant({ label: '?zzz unknown', text: 'zzz=1' }),
        ),
      )
      .map((values) => values.filter((v): v is Labelled => v !== null));
    const headers = fc.tuple(
      ...headerParams.map((p) =>
        fc.option(
          fc
            .constantFrom('', 'a', 't=1,v1=00', 'x'.repeat(4000), 'ÿþ', '__proto__')
            .map((value) => ({ name: p.name, value })),
        ),
      ),
    );
    return fc
      .record({
        credential: fc.constantFrom<FuzzRequest['credential']>(
          'owner token',
          'admin key',
          'owner token + foreign X-Organization-Id',
        ),
        path,
        query,
        headers,
        body: bodyArbitrary(operation),
      })
      .map(({ credential, path: p, query: q, headers: h, body }) => {
        const headerValues: Record<string, string> = { ...credentials[credential] };
        for (const header of h) if (header) headerValues[header.name] = header.value;
        if (body.body !== undefined)
          headerValues['content-type'] = body.contentType ?? 'application/json';
        const search = q.length > 0 ? `?${q.map((v) => v.text).join('&')}` : '';
        return {
          credential,
          path: `${p.path}${search}`,
          headers: headerValues,
          body: body.body,
          label: [p.label, ...q.map((v) => v.label), body.label].filter(Boolean).join('; '),
        };
      });
  }

  /** Raw HTTP, so the path goes out exactly as built (no URL normalisation) and GETs can carry a body. */
  function send(method: string, fuzz: FuzzRequest): Promise<Answer> {
    return new Promise((resolveAnswer, reject) => {
      const req = httpRequest(
        {
          ...base,
          method,
          path: fuzz.path,
          agent: false,
          headers: {
            ...fuzz.headers,
            ...(fuzz.body !== undefined ? { 'content-length': Buffer.byteLength(fuzz.body) } : {}),
          },
          timeout: REQUEST_TIMEOUT_MS,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (chunk: Buffer) => chunks.push(chunk));
          res.on('end', () =>
            resolveAnswer({
              status: res.statusCode ?? 0,
              headers: res.headers,
              body: Buffer.concat(chunks).toString('utf8'),
            }),
          );
          res.on('error', reject);
        },
      );
      req.on('timeout', () => req.destroy(new Error(`no answer within ${REQUEST_TIMEOUT_MS} ms`)));
      req.on('error', reject);
      req.end(fuzz.body);
    });
  }

  function loggedError(requestId: string | undefined): string | undefined {
    const line = t.logs.entries().find((entry) => entry.requestId === requestId && entry.err);
    const err = line?.err as { type?: string; message?: string; stack?: string } | undefined;
    if (!err) return undefined;
    const frame = err.stack?.split('\n').find((l) => l.includes('/src/'));
    return `${err.type ?? 'Error'}: ${String(err.message).slice(0, 200)}${frame ? ` ${frame.trim()}` : ''}`;
  }

  function problemsOf(answer: Answer): string[] {
    const problems: string[] = [];
    if (answer.status >= 500) problems.push(`answered ${answer.status}`);
    const requestId = answer.headers['x-request-id'];
    if (!requestId) problems.push('no X-Request-Id header');
    if (answer.status >= 400) {
      let envelope:
        { error?: { status?: unknown; code?: unknown; request_id?: unknown } } | undefined;
      try {
        envelope = JSON.parse(answer.body);
      } catch {
        envelope = undefined;
      }
      const error = envelope?.error;
      if (
        !error ||
        error.status !== answer.status ||
        typeof error.code !== 'string' ||
        error.request_id !== requestId
      )
        problems.push('no error envelope matching the status and X-Request-Id');
    }
    return problems;
  }

  it('answers every generated request without a 5xx, with a request id and the error envelope', async () => {
    const randomSeed = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Date.now() % 2 ** 31;
    console.log(
      'fuzz seed',
      randomSeed,
      `(fixed seed ${FIXED_SEED}; replay with FUZZ_SEED=${randomSeed})`,
    );

    const operations: Operation[] = [];
    for (const [path, item] of Object.entries(document.paths)) {
      for (const [method, operation] of Object.entries(item)) {
        const requestBody = operation.requestBody as
          { content?: Record<string, { schema?: Schema }> } | undefined;
        operations.push({
          method: method.toUpperCase(),
          path,
          parameters: (operation.parameters as Parameter[] | undefined) ?? [],
          bodySchema: requestBody?.content?.['application/json']?.schema,
        });
      }
    }
    expect(operations.length).toBeGreaterThan(30);

    const failures: Failure[] = [];
    const seen = new Set<string>();
    let cases = 0;
    const started = Date.now();
    const check = async (operation: Operation, fuzz: FuzzRequest) => {
      const name = `${operation.method} ${operation.path}`;
      cases += 1;
      let answer: Answer;
      try {
        answer = await send(operation.method, fuzz);
      } catch (error) {
        answer = { status: 0, headers: {}, body: String(error) };
      }
      const problems = answer.status === 0 ? ['no answer (connection failed)'] : problemsOf(answer);
      for (const problem of problems) {
        const key = `${name}|${problem}|${fuzz.label.replace(/"[^"]*"/g, '…')}`;
        if (seen.has(key)) continue;
        seen.add(key);
        failures.push({
          operation: name,
          problem,
          request: {
            method: operation.method,
            path: fuzz.path.length > 300 ? `${fuzz.path.slice(0, 300)}…` : fuzz.path,
            label: fuzz.label,
            credential: fuzz.credential,
            body:
              fuzz.body && fuzz.body.length > 300
                ? `${fuzz.body.slice(0, 300)}… (${fuzz.body.length} chars)`
                : fuzz.body,
          },
          status: answer.status,
          response: answer.body.slice(0, 500),
          requestId: answer.status >= 500 ? String(answer.headers['x-request-id']) : undefined,
        });
      }
    };

    // A few requests at a time: argon2 (sign-up, login) and the database wait in other threads,
    // so the run takes a fraction of the time a strictly sequential one would.
    const runAll = async (work: Array<[Operation, FuzzRequest]>) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next < work.length) {
            const [operation, fuzz] = work[next++];
            await check(operation, fuzz);
          }
        }),
      );
    };
    await runAll(
      operations.flatMap((operation) =>
        sweepRequests(operation).map((fuzz): [Operation, FuzzRequest] => [operation, fuzz]),
      ),
    );
    const swept = cases;
    const sweptIn = Date.now() - started;
    for (const seed of [FIXED_SEED, randomSeed]) {
      await runAll(
        operations.flatMap((operation, index) =>
          fc
            .sample(requestArbitrary(operation), {
              seed: (seed + index * 7919) | 0,
              numRuns: RUNS_PER_OPERATION,
            })
            .map((fuzz): [Operation, FuzzRequest] => [operation, fuzz]),
        ),
      );
    }
    console.log(
      `fuzz cases run: ${cases} (sweep ${swept} in ${sweptIn} ms; random ${cases - swept} = ${operations.length} operations × 2 seeds × ${RUNS_PER_OPERATION}) in ${Date.now() - started} ms; failures: ${failures.length}`,
    );

    // The process that took all of that still answers, and what the run changed still works: a
    // value a PATCH let through must not break later requests on the same resources.
    const live = await t.http().get('/health/live');
    expect(live.status).toBe(200);
    const afterwards: Array<[string, string, string, unknown]> = [
      [
        'POST',
        '/v1/respond',
        'respond to the PATCHed personality',
        {
          personality_id: ids.personalityToChange,
          user_id: `fuzz-after-${randomUUID()}`,
          message: 'are you still there?',
        },
      ],
      [
        'GET',
        `/v1/personalities/${ids.personalityToChange}`,
        'read the PATCHed personality',
        undefined,
      ],
      [
        'GET',
        `/v1/end-users/${encodeURIComponent(ids.endUser)}/export`,
        'export the fuzzed end user',
        undefined,
      ],
      [
        'GET',
        `/v1/end-users/${encodeURIComponent(ids.endUser)}/model`,
        'model of the fuzzed end user',
        undefined,
      ],
      ['GET', '/v1/end-users', 'list end users', undefined],
      ['GET', '/v1/personalities', 'list personalities', undefined],
      ['GET', '/v1/api-keys', 'list API keys', undefined],
    ];
    for (const [method, path, label, body] of afterwards) {
      const fuzz: FuzzRequest = {
        credential: 'admin key',
        path,
        headers: {
          ...credentials['admin key'],
          ...(body ? { 'content-type': 'application/json' } : {}),
        },
        body: body ? JSON.stringify(body) : undefined,
        label: `after the run: ${label}`,
      };
      await check({ method, path, parameters: [] }, fuzz);
    }
    for (const failure of failures) failure.logged = loggedError(failure.requestId);
    if (failures.length > 0) console.log(JSON.stringify(failures, null, 2));

    expect(
      failures.map((f) => `${f.operation}: ${f.problem} (${f.request.label}) → ${f.response}`),
    ).toEqual([]);
  }, 150_000);
});
