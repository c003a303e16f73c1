import { Writable } from 'node:stream';
import { createRootLogger } from './root-logger';

describe('createRootLogger', () => {
  function logged(write: (logger: ReturnType<typeof createRootLogger>) => void): string {
    let text = '';
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        text += chunk.toString();
        done();
      },
    });
    write(createRootLogger('info', destination));
    return text;
  }

  it("redacts a secret's name at the top of a line and one level down, snake or camel case (review)", () => {
    const text = logged((logger) => {
      logger.info({ password: 'TOP_PASSWORD', kept: 'visible' }, 'one');
      logger.info({ user: { apiKey: 'CAMEL_KEY', access_token: 'SNAKE_TOKEN' } }, 'two');
      logger.info({ webhookSecret: 'WEBHOOK_SECRET', cookie: 'COOKIE' }, 'three');
      logger.child({ token: 'CHILD_TOKEN' }).info('four');
    });
    expect(text).not.toMatch(
      /TOP_PASSWORD|CAMEL_KEY|SNAKE_TOKEN|WEBHOOK_SECRET|COOKIE|CHILD_TOKEN/,
    );
    expect(text.match(/\[redacted\]/g)).toHaveLength(6);
    expect(text).toContain('"kept":"visible"');
  });
});
