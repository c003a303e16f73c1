import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret, signatureHeaders } from './webhook-signer';

describe('webhook signatures', () => {
  it('makes secrets of whsec_ + base64 of 32 random bytes, different each time', () => {
    const secret = generateWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), 'base64')).toHaveLength(32);
    expect(generateWebhookSecret()).not.toBe(secret);
  });

  it('signs so that the standardwebhooks library verifies, and a changed body does not', () => {
    const secret = generateWebhookSecret();
    const body = JSON.stringify({ id: 'evt_1', type: 'ping', data: { a: 'é' } });
    const headers = signatureHeaders(secret, 'evt_1', Math.floor(Date.now() / 1000), body);
    const verifier = new Webhook(secret);
    expect(verifier.verify(body, headers)).toEqual(JSON.parse(body));
    expect(() => verifier.verify(body.replace('ping', 'pong'), headers)).toThrow();
    expect(() => new Webhook(generateWebhookSecret()).verify(body, headers)).toThrow();
  });
});
