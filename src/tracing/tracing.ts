import type { NodeSDK } from '@opentelemetry/sdk-node';
import { AppEnv } from '../config/app.config';
import { TelemetryEnv, tracingEnabled } from '../config/telemetry.config';
import { validateEnv } from '../config/validate-env';

let sdk: NodeSDK | undefined;

/**
 * Starts OpenTelemetry tracing when OTEL_EXPORTER_OTLP_ENDPOINT (or the traces-only endpoint) is
 * set. It must run before express, pg and ioredis are first required, since the
 * instrumentations patch them as they load: main.ts imports ./register before anything else.
 * When off, the SDK is not even loaded, so it costs nothing.
 */
export function startTracing(env: NodeJS.ProcessEnv = process.env): boolean {
  if (sdk) return true;
  if (!tracingEnabled(validateEnv(TelemetryEnv, env))) return false;
  // eslint-disable-next-line @typescript-eslint/no-require-imports -- loaded only when tracing is on
  const { createTracingSdk } = require('./sdk') as typeof import('./sdk');
  // Spans name the client as the service does: X-Forwarded-For is believed only under TRUST_PROXY.
  sdk = createTracingSdk({ trustProxy: validateEnv(AppEnv, env).TRUST_PROXY ?? false });
  sdk.start();
  return true;
}

export function tracingStarted(): boolean {
  return sdk !== undefined;
}

/**
 * How long a shutdown waits for the spans still buffered to be exported: a collector that takes
 * connections and never answers held every exit until SHUTDOWN_TIMEOUT_MS, then exit 1, with
 * "shutdown timed out" blaming the service (found by review).
 */
export const SPAN_EXPORT_AT_EXIT_MS = 3_000;

/**
 * Exports the spans still buffered, for `waitMs` at most (none left: fails at once); called last
 * at shutdown.
 */
export async function stopTracing(waitMs = SPAN_EXPORT_AT_EXIT_MS): Promise<void> {
  if (!sdk) return;
  const wait = Math.max(0, waitMs);
  let timer: NodeJS.Timeout | undefined;
  const gaveUp = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(
      () => reject(new Error(`the collector took no spans within ${wait} ms`)),
      wait,
    );
  });
  try {
    await Promise.race([sdk.shutdown(), gaveUp]);
  } finally {
    clearTimeout(timer);
  }
}
