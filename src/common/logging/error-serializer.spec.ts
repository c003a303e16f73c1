import { QueryFailedError } from 'typeorm';
import { serializeError } from './error-serializer';

describe('serializeError', () => {
  it('keeps a database error to its type, SQLSTATE and constraint, never the content', () => {
    const driverError = Object.assign(
      new Error('duplicate key value violates unique constraint "end_users_unique"'),
      {
        code: '23505',
        constraint: 'end_users_unique',
        table: 'end_users',
        detail: 'Key (user_id)=(alice@example.com) already exists.',
      },
    );
    const error = new QueryFailedError(
      'INSERT INTO end_users …',
      ['alice@example.com'],
      driverError,
    );
    const serialized = serializeError(error);
    expect(serialized).toMatchObject({
      type: 'QueryFailedError',
      code: '23505',
      constraint: 'end_users_unique',
      table: 'end_users',
    });
    expect(JSON.stringify(serialized)).not.toMatch(/alice|duplicate|INSERT/);
  });

  it('keeps the message and stack of other errors, and leaves non-errors alone', () => {
    const serialized = serializeError(new RangeError('Invalid time value')) as Record<
      string,
      unknown
    >;
    expect(serialized).toMatchObject({ type: 'RangeError', message: 'Invalid time value' });
    expect(serialized.stack).toContain('RangeError');
    expect(serializeError('text')).toBe('text');
  });
});
