import { AppError } from '../common/errors/app-error';
import { parseIdempotencyKey } from '../common/http/idempotency-key';
import { requestFingerprint } from './idempotency-request';
import { isStoredOutcome } from './idempotency.service';
import { secretFieldsOf, withoutSecrets } from './replay-secrets';

describe('Idempotency-Key rules', () => {
  it('takes 1..255 printable ASCII characters', () => {
    expect(parseIdempotencyKey('a')).toBe('a');
    expect(parseIdempotencyKey(' ~'.repeat(127) + 'x')).toHaveLength(255);
    for (const bad of ['', 'k'.repeat(256), 'a\tb', 'clé', 'a\u0000b']) {
      expect(() => parseIdempotencyKey(bad)).toThrow(AppError);
    }
  });

  it('sees the same request in another key order, and another one in any other difference', () => {
    const a = requestFingerprint('POST', '/v1/x', { b: 1, a: { d: [1, { f: 2, e: 3 }], c: null } });
    const b = requestFingerprint('POST', '/v1/x', { a: { c: null, d: [1, { e: 3, f: 2 }] }, b: 1 });
    expect(a.equals(b)).toBe(true);
    expect(requestFingerprint('POST', '/v1/x', undefined)).toEqual(
      requestFingerprint('POST', '/v1/x', {}),
    );
    expect(a.equals(requestFingerprint('POST', '/v1/y', { b: 1 }))).toBe(false);
    expect(
      requestFingerprint('POST', '/v1/x', { a: [1, 2] }).equals(
        requestFingerprint('POST', '/v1/x', { a: [2, 1] }),
      ),
    ).toBe(false);
    expect(
      requestFingerprint('POST', '/v1/x', { a: '1' }).equals(
        requestFingerprint('POST', '/v1/x', { a: 1 }),
      ),
    ).toBe(false);
  });

  it('hashes the canonical text as before it was streamed, so keys stored earlier still match', () => {
    // The hash the whole-string implementation gave this request.
    expect(
      requestFingerprint('POST', '/v1/x', {
        b: 1,
        a: { d: [1, { f: 2, e: 3 }], c: null },
      }).toString('hex'),
    ).toBe('9c2c40dd14ad06ef210a8fddb872add12b5fdc95a8a3f3b2dabfa7d08018c684');
    // Longer than one piece handed to the hash: the pieces join to the same text.
    const long = { memories: Array.from({ length: 2_000 }, (_, i) => ({ id: `${i}`, c: 'é\n' })) };
    const reordered = {
      memories: long.memories.map((memory) => ({ c: memory.c, id: memory.id })),
    };
    expect(requestFingerprint('POST', '/v1/x', long)).toEqual(
      requestFingerprint('POST', '/v1/x', reordered),
    );
  });

  it('stores 2xx and decided 4xx, never 5xx, 429 or refused bodies', () => {
    expect(isStoredOutcome(201)).toBe(true);
    expect(isStoredOutcome(404, 'not_found')).toBe(true);
    expect(isStoredOutcome(409, 'end_user_under_deletion')).toBe(true);
    expect(isStoredOutcome(400, 'validation_failed')).toBe(false);
    expect(isStoredOutcome(400, 'malformed_json')).toBe(false);
    expect(isStoredOutcome(429, 'too_many_streams')).toBe(false);
    expect(isStoredOutcome(402, 'budget_exceeded')).toBe(false);
    expect(isStoredOutcome(409, 'turn_not_pending')).toBe(false);
    expect(isStoredOutcome(409, 'conflict')).toBe(false);
    expect(isStoredOutcome(502, 'engine_unavailable')).toBe(false);
  });

  it('nulls the secret fields of the routes that show one once', () => {
    expect(secretFieldsOf('POST', '/v1/api-keys')).toEqual(['key']);
    expect(secretFieldsOf('POST', '/v1/api-keys/:id/roll')).toEqual(['key']);
    expect(secretFieldsOf('POST', '/v1/webhook-endpoints')).toEqual(['secret']);
    expect(secretFieldsOf('POST', '/v1/end-users')).toEqual([]);
    const body = { id: '1', key: 'pk_secret' };
    expect(withoutSecrets(body, ['key'])).toEqual({ id: '1', key: null });
    expect(body.key).toBe('pk_secret');
  });
});
