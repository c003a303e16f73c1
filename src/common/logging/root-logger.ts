import pino, { DestinationStream, Logger } from 'pino';
import { serializeError } from './error-serializer';
import { SECRET_FIELD_NAMES } from '../crypto/secret-fields';

export const ROOT_LOGGER = Symbol('ROOT_LOGGER');
export const LOG_DESTINATION = Symbol('LOG_DESTINATION');

/**
 * Paths removed from every log line, whatever logs them: credentials, secrets and personal
 * data that must never reach stdout.
 */
export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'req.headers["stripe-signature"]',
  'res.headers["set-cookie"]',
  ...SECRET_FIELD_NAMES.map((name) => `*.${name}`),
];

/** Stdout without blocking the event loop on every line; flushed when the process exits. */
export function createStdoutDestination(): DestinationStream {
  return pino.destination({ fd: 1, sync: false, minLength: 4096 });
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
