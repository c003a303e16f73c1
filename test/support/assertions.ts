import type { Response } from 'supertest';
import { AppError } from '../../src/common/errors/app-error';

export const ULID = /^[0-9A-HJKMNP-TV-Z]{26}$/;

/** Every response carries a fresh ULID X-Request-Id; error bodies repeat it. */
export function expectRequestId(response: Response): string {
  const id = response.headers['x-request-id'];
  expect(id).toMatch(ULID);
  if (response.status >= 400 && response.body?.error) {
    expect(response.body.error.request_id).toBe(id);
  }
  return id;
}

/** Asserts the error envelope of the API contract (§4) with this status and code. */
export function expectError(response: Response, status: number, code: string): void {
  expect({ status: response.status, code: response.body?.error?.code }).toEqual({ status, code });
  expect(response.body.error).toEqual(
    expect.objectContaining({
      status,
      code,
      message: expect.any(String),
      request_id: expect.any(String),
    }),
  );
  expectRequestId(response);
  const body = JSON.stringify(response.body);
  expect(body).not.toMatch(/\bat .+\.(ts|js):\d+/); // no stack frames
  expect(body).not.toMatch(/QueryFailedError|TypeORMError|SELECT |INSERT INTO/);
}

/** Asserts that a service call fails with the AppError of this code. */
export async function expectAppError(promise: Promise<unknown>, code: string): Promise<void> {
  const error: unknown = await promise.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
}

/**
 * The strings a JSON document says, but its ids and timestamps: a check that a word is gone looks
 * here, where a generated id or time (a uuid's "4711" group, memory 14711) cannot hold it by chance.
 */
export function textsOf(value: unknown, key = ''): string[] {
  if (typeof value === 'string') return /(^|_)id$|_at$/.test(key) ? [] : [value];
  if (Array.isArray(value)) return value.flatMap((item) => textsOf(item, key));
  if (value && typeof value === 'object') {
    return Object.entries(value).flatMap(([name, item]) => textsOf(item, name));
  }
  return [];
}
