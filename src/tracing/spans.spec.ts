import { APIError } from 'openai';
import { failureOf } from './spans';

describe('failureOf', () => {
  it('names a failure by its kind, code and HTTP status, never by its message (review)', () => {
    const provider = APIError.generate(
      400,
      { message: "message 'my secret words' rejected; key sk-secret" },
      "400 message 'my secret words' rejected; key sk-secret",
      new Headers(),
    );
    expect(failureOf(provider)).toBe('BadRequestError HTTP 400');
    const refused = Object.assign(new Error('connect ECONNREFUSED 10.0.0.1:443 for a@b.example'), {
      code: 'ECONNREFUSED',
    });
    expect(failureOf(refused)).toBe('Error ECONNREFUSED');
    const stripe = Object.assign(new Error('No such customer: cus_secret'), {
      name: 'StripeInvalidRequestError',
      statusCode: 404,
    });
    expect(failureOf(stripe)).toBe('StripeInvalidRequestError HTTP 404');
  });

  it('keeps a code that is not a plain identifier out, and names what is not an object by its type', () => {
    expect(failureOf(Object.assign(new Error('x'), { code: 'the user wrote this' }))).toBe('Error');
    expect(failureOf('a thrown string with words')).toBe('string');
    expect(failureOf(undefined)).toBe('undefined');
    expect(failureOf(Object.create(null))).toBe('Error');
  });
});
