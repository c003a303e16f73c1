import { createHmac, randomBytes } from 'node:crypto';

const SECRET_PREFIX = 'whsec_';
/** 32 random bytes: above the contract's minimum of 24, and the HMAC-SHA256 block's key size. */
const SECRET_BYTES = 32;

/** A new endpoint secret: `whsec_` + base64 of random bytes (Standard Webhooks). */
export function generateWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(SECRET_BYTES).toString('base64');
}

/**
 * The Standard Webhooks headers of one attempt: `webhook-signature` is `v1,` + base64 of
 * HMAC-SHA256 over `{id}.{timestamp}.{body}`, keyed with the base64-decoded part of the secret
 * after `whsec_`. The `standardwebhooks` and `svix` libraries verify it.
 */
export function signatureHeaders(
  secret: string,
  webhookId: string,
  timestampSeconds: number,
  body: string,
): Record<'webhook-id' | 'webhook-timestamp' | 'webhook-signature', string> {
  const key = Buffer.from(secret.slice(SECRET_PREFIX.length), 'base64');
  const signature = createHmac('sha256', key)
    .update(`${webhookId}.${timestampSeconds}.${body}`)
    .digest('base64');
  return {
    'webhook-id': webhookId,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': `v1,${signature}`,
  };
}
