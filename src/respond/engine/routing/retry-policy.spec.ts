import { APIConnectionError, APIError } from 'openai';
import { backoffMs, classifyFailure, retryAfterMs, UnusableAnswer } from './retry-policy';

const now = Date.parse('2031-01-01T00:00:00Z');
const apiError = (status: number, headers: Record<string, string> = {}) =>
  APIError.generate(status, { message: 'provider words' }, undefined, new Headers(headers));

describe('retry policy', () => {
  it.each([
    [408, 'retry', true],
    [409, 'retry', true],
    [429, 'retry', true],
    [500, 'retry', true],
    [502, 'retry', true],
    [503, 'retry', true],
    [401, 'next', true],
    [403, 'next', true],
    [404, 'next', true],
    // About the request, not the route: next route, and the breaker does not count it.
    [400, 'next', false],
    [413, 'next', false],
    [422, 'next', false],
  ] as const)('HTTP %i: %s, counts against the route: %s', (status, kind, counts) => {
    const failure = classifyFailure(apiError(status), now);
    expect(failure).toMatchObject({ kind, countsAgainstRoute: counts });
    expect(failure.description).toBe(`The model provider failed (HTTP ${status})`);
  });

  it('retries a connection refused or reset, and a stream cut off; not a garbage answer', () => {
    const refused = new APIConnectionError({ cause: new Error('connect ECONNREFUSED') });
    expect(classifyFailure(refused, now)).toMatchObject({
      kind: 'retry',
      countsAgainstRoute: true,
    });
    expect(classifyFailure(new TypeError('terminated'), now).kind).toBe('retry');
    expect(classifyFailure(new UnusableAnswer('cut', true), now).kind).toBe('retry');
    expect(classifyFailure(new UnusableAnswer('empty', false), now)).toMatchObject({
      kind: 'next',
      countsAgainstRoute: true,
    });
    expect(classifyFailure(new SyntaxError('Unexpected token <'), now).kind).toBe('next');
  });

  it('never passes on the provider’s own error text', () => {
    expect(classifyFailure(apiError(500), now).description).not.toContain('provider words');
  });

  it('reads Retry-After in ms, seconds or as a date, capped at 2 s', () => {
    const after = (headers: Record<string, string>) => retryAfterMs(new Headers(headers), now);
    expect(after({ 'retry-after-ms': '150' })).toBe(150);
    expect(after({ 'retry-after-ms': '150', 'retry-after': '1' })).toBe(150);
    expect(after({ 'retry-after': '1' })).toBe(1_000);
    expect(after({ 'retry-after': '0.5' })).toBe(500);
    expect(after({ 'retry-after': '3600' })).toBe(2_000);
    expect(after({ 'retry-after': new Date(now + 1_200).toUTCString() })).toBe(1_000); // whole seconds
    expect(after({ 'retry-after': new Date(now + 3_600_000).toUTCString() })).toBe(2_000);
    expect(after({ 'retry-after': new Date(now - 60_000).toUTCString() })).toBe(0);
    expect(after({ 'retry-after': 'soon' })).toBeNull();
    expect(after({})).toBeNull();
    expect(retryAfterMs(undefined, now)).toBeNull();
    expect(classifyFailure(apiError(429, { 'retry-after': '3600' }), now).retryAfterMs).toBe(2_000);
    // A wait is only asked of what is retried.
    expect(classifyFailure(apiError(404, { 'retry-after': '1' }), now).retryAfterMs).toBeNull();
  });

  it('backs off 125–250 ms before the first retry, doubling, at most 2 s', () => {
    expect(backoffMs(1, () => 0)).toBe(250);
    expect(backoffMs(1, () => 1)).toBe(125);
    expect(backoffMs(2, () => 0)).toBe(500);
    expect(backoffMs(3, () => 0)).toBe(1_000);
    expect(backoffMs(4, () => 0)).toBe(2_000);
    expect(backoffMs(10, () => 0)).toBe(2_000);
    for (let i = 0; i < 100; i++) {
      const wait = backoffMs(1);
      expect(wait).toBeGreaterThanOrEqual(125);
      expect(wait).toBeLessThanOrEqual(250);
    }
  });
});
