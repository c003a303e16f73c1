import { startTracing } from './tracing';

// A side-effect import, first in main.ts, so tracing starts before any instrumented module loads.
try {
  startTracing();
} catch (error) {
  process.stderr.write(
    `Start-up failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
}
