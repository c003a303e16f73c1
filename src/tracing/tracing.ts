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

/** Exports the spans still buffered; called last at shutdown. */
export async function stopTracing(): Promise<void> {
  await sdk?.shutdown();
}
