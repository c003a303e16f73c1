import { APIError, BadRequestError } from 'openai';
import { QueryFailedError } from 'typeorm';
import { serializeError } from './error-serializer';
import { maskAddresses } from './mask-address';

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

  it("keeps a provider's error to its status, code and type: its body may quote the input (review)", () => {
    const body = {
      message: 'Invalid input ["My secret diagnosis is CANARY-42"]',
      type: 'invalid_request_error',
      code: 'invalid_input',
    };
    const refused = APIError.generate(400, { error: body }, undefined, new Headers());
    expect(refused).toBeInstanceOf(BadRequestError);
    const serialized = serializeError(refused);
    expect(serialized).toEqual({
      type: 'BadRequestError',
      status: 400,
      code: 'invalid_input',
      errorType: 'invalid_request_error',
      stack: expect.any(String),
    });
    expect(JSON.stringify(serialized)).not.toContain('CANARY');
  });

  it("masks e-mail addresses in other errors' message and stack: a mail server quotes them (review)", () => {
    const refused = Object.assign(
      new Error(
        "Can't send mail - all recipients were rejected: 550 5.1.1 <reject.me@victim-corp.example>: Recipient address rejected",
      ),
      { code: 'EENVELOPE' },
    );
    const serialized = serializeError(refused) as { message: string; stack: string; code: string };
    expect(serialized.message).toBe(
      "Can't send mail - all recipients were rejected: 550 5.1.1 <r***@victim-corp.example>: Recipient address rejected",
    );
    expect(serialized.stack).toContain('<r***@victim-corp.example>');
    expect(JSON.stringify(serialized)).not.toContain('reject.me');
    expect(serialized.code).toBe('EENVELOPE');
  });

  it('masks only what is an address: module paths, versions and a lone "@" stay as written', () => {
    expect(maskAddresses('at x (/app/node_modules/@nestjs/core/router.js:12:3)')).toBe(
      'at x (/app/node_modules/@nestjs/core/router.js:12:3)',
    );
    expect(maskAddresses('pino@9.1.0 and @mention and a@b')).toBe(
      'pino@9.1.0 and @mention and a@b',
    );
    expect(maskAddresses('to ada@example.com. Then bo+x@mail.example.org-')).toBe(
      'to a***@example.com. Then b***@mail.example.org-',
    );
    expect(maskAddresses('a@b@c.example')).toBe('a@b***@c.example');
    // A local part is read back 64 characters at most: linear, whatever the text.
    const long = `${'a'.repeat(100_000)}@example.com ${'@'.repeat(10_000)}`;
    const masked = maskAddresses(long);
    expect(masked === `${'a'.repeat(99_936)}a***@example.com ${'@'.repeat(10_000)}`).toBe(true);
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
