import { appConfig } from './app.config';
import { authConfig } from './auth.config';
import { databaseConfig } from './database.config';

describe('configuration validation', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('names the variable when a value is bad', () => {
    process.env.PORT = 'eighty';
    expect(() => appConfig()).toThrow(/PORT/);
  });

  it('refuses a shutdown shorter than a second, which would cut every request in flight', () => {
    process.env.SHUTDOWN_TIMEOUT_MS = '0';
    expect(() => appConfig()).toThrow(/SHUTDOWN_TIMEOUT_MS/);
    process.env.SHUTDOWN_TIMEOUT_MS = '1000';
    expect(appConfig().shutdownTimeoutMs).toBe(1000);
  });

  it("refuses a shutdown longer than an hour: past a timer's range it was no wait at all", () => {
    process.env.SHUTDOWN_TIMEOUT_MS = '3000000000';
    expect(() => appConfig()).toThrow(/SHUTDOWN_TIMEOUT_MS/);
    process.env.SHUTDOWN_TIMEOUT_MS = '3600000';
    expect(appConfig().shutdownTimeoutMs).toBe(3_600_000);
  });

  it('requires DATABASE_URL to be a postgres URL', () => {
    process.env.DATABASE_URL = 'mysql://localhost/x';
    expect(() => databaseConfig()).toThrow(/DATABASE_URL/);
  });

  it('requires JWT_SECRET in production only', () => {
    delete process.env.JWT_SECRET;
    process.env.NODE_ENV = 'production';
    expect(() => authConfig()).toThrow(/JWT_SECRET/);
    process.env.NODE_ENV = 'development';
    expect(authConfig().jwtSecret.length).toBeGreaterThanOrEqual(32);
  });

  it('refuses a malformed SSO_PROVIDERS with the entry named', () => {
    process.env.SSO_PROVIDERS =
      '[{"id":"acme","issuer":"https://idp","audience":"x","jwks_uri":"not a url"}]';
    expect(() => authConfig()).toThrow(/SSO_PROVIDERS\[0\]\.jwks_uri/);
  });

  it('applies documented defaults', () => {
    delete process.env.PORT;
    delete process.env.APP_PUBLIC_URL;
    expect(appConfig()).toMatchObject({
      port: 3000,
      publicUrl: 'http://localhost:3000',
      trustProxy: false,
    });
  });
});
