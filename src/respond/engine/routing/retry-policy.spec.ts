import { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import {
  backoffMs,
  classifyFailure,
  CutOffAnswer,
  retryAfterMs,
  UnusableAnswer,
} from './retry-policy';

const now = Date.parse('2031-01-01T00:00:00Z');
const apiError = (status: number, headers: Record<string, string> = {}) =>
  APIError.generate(status, { message: 'provider words' }, undefined, new Headers(headers));

describe('retry policy', () => {
  // §29: a route's breaker counts what says the provider or the way to it failed (408, 429, 5xx)
  // and nothing a request can make it answer.
  it.each([
    [408, 'retry', true],
    [409, 'retry', false],
    [429, 'retry', true],
    [500, 'retry', true],
    [502, 'retry', true],
    [503, 'retry', true],
    [401, 'next', false],
    [403, 'next', false],
    [404, 'next', false],
    [400, 'next', false],
    [413, 'next', false],
    [422, 'next', false],
  ] as const)('HTTP %i: %s, counts against the route: %s', (status, kind, counts) => {
    const failure = classifyFailure(apiError(status), now);
    expect(failure).toMatchObject({ kind, countsAgainstRoute: counts });
    expect(failure.description).toBe(`The model provider failed (HTTP ${status})`);
  });

  it('retries a connection refused or reset, and a stream cut off, counting each against the route', () => {
    const refused = new APIConnectionError({ cause: new Error('connect ECONNREFUSED') });
    const timedOut = new APIConnectionTimeoutError();
    const terminated = new TypeError('terminated', {
      cause: Object.assign(new Error('other side closed'), { code: 'UND_ERR_SOCKET' }),
    });
    const reset = Object.assign(new Error('read ECONNRESET'), { code: 'ECONNRESET' });
    for (const error of [refused, timedOut, terminated, reset, new CutOffAnswer()]) {
      expect(classifyFailure(error, now)).toMatchObject({
        kind: 'retry',
        countsAgainstRoute: true,
      });
    }
  });

  it('never counts an answer that holds no reply: refused, empty, garbage, too long, an error event', () => {
    const noReply = [
      new UnusableAnswer('refused'),
      new UnusableAnswer('empty'),
      new UnusableAnswer('past ENGINE_MAX_TOKENS'),
      new SyntaxError('Unexpected token <'),
    ];
    for (const error of noReply) {
      expect(classifyFailure(error, now)).toMatchObject({
        kind: 'next',
        countsAgainstRoute: false,
      });
    }
    // The provider's `{"error": …}` event inside a 200 stream: said by the provider about this
    // request, with no status: tried again, but no proof the route is down.
    const errorEvent = new APIError(undefined, { message: 'boom' }, undefined, new Headers());
    expect(classifyFailure(errorEvent, now)).toMatchObject({
      kind: 'retry',
      countsAgainstRoute: false,
    });
    // Anything else (a bug of ours reading an odd answer): the next route, not counted.
    expect(
      classifyFailure(new TypeError("Cannot read properties of undefined (reading 'x')"), now),
    ).toMatchObject({ kind: 'next', countsAgainstRoute: false });
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
