import pino, { DestinationStream, Logger } from 'pino';
import { serializeError } from './error-serializer';
import { SECRET_FIELD_NAMES } from '../crypto/secret-fields';

export const ROOT_LOGGER = Symbol('ROOT_LOGGER');
export const LOG_DESTINATION = Symbol('LOG_DESTINATION');

/** Secret names only logs refuse (webhook data may carry them), beside SECRET_FIELD_NAMES. */
const LOGGED_SECRET_NAMES = [
  'cookie',
  'webhook_secret',
  'signing_secret',
  'reset_token',
  'invitation_token',
  'verification_token',
];

/** `api_key` → `apiKey`: how a name is written in a TypeScript object. */
const camelCase = (name: string): string =>
  name.replace(/_([a-z])/g, (_, letter: string) => letter.toUpperCase());

const redactedNames = [
  ...new Set([...SECRET_FIELD_NAMES, ...LOGGED_SECRET_NAMES].flatMap((n) => [n, camelCase(n)])),
];

/**
 * Paths removed from every log line, whatever logs them: credentials, secrets and personal
 * data that must never reach stdout. A secret's name at the top of a line or one level down
 * (`{ token }`, `{ user: { password } }`), in snake or camel case (found by review: top-level
 * names and `apiKey` were kept).
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["stripe-signature"]',
  'res.headers["set-cookie"]',
  ...redactedNames.flatMap((name) => [name, `*.${name}`]),
];

/** The longest a line waits in the buffer before it is written, however quiet the instance. */
const FLUSH_INTERVAL_MS = 1000;

/**
 * Stdout without blocking the event loop on every line: written in blocks of 4 KiB, and at least
 * every FLUSH_INTERVAL_MS (a quiet instance's lines waited for 4 KiB of others, without limit,
 * and a hard kill lost them; found by review); flushed when the process exits.
 */
export function createStdoutDestination(): DestinationStream {
  const destination = pino.destination({ fd: 1, sync: false, minLength: 4096 });
  setInterval(() => {
    try {
      destination.flush();
    } catch {
      // Ended at exit, after its last lines were written: nothing is left to flush.
    }
  }, FLUSH_INTERVAL_MS).unref();
  return destination;
}

export function createRootLogger(
  level: string,
  destination: DestinationStream,
  mixin?: () => Record<string, unknown>,
): Logger {
  return pino(
    {
      level,
      ...(mixin ? { mixin } : {}),
      base: { service: 'personality-api' },
      timestamp: pino.stdTimeFunctions.isoTime,
      messageKey: 'msg',
      redact: { paths: REDACTED_PATHS, censor: '[redacted]' },
      serializers: { err: serializeError, error: serializeError },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
