import { authConfig } from './auth.config';

describe('auth config', () => {
  const saved = process.env.JWT_SECRET;
  afterEach(() => {
    if (saved === undefined) delete process.env.JWT_SECRET;
    else process.env.JWT_SECRET = saved;
  });

  it.each([' '.repeat(40), `${' '.repeat(20)}${'x'.repeat(31)}`])(
    'stops start-up on a JWT_SECRET of fewer than 32 characters that are not spaces (review)',
    (secret) => {
      process.env.JWT_SECRET = secret;
      expect(() => authConfig()).toThrow(/JWT_SECRET must hold at least 32 characters/);
    },
  );

  it('takes 32 characters that are not spaces, spaces between them allowed', () => {
    process.env.JWT_SECRET = `${'x'.repeat(16)} ${'y'.repeat(16)}`;
    expect(() => authConfig()).not.toThrow();
  });
});
