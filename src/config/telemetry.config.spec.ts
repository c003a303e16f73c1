import { TelemetryEnv } from './telemetry.config';
import { validateEnv } from './validate-env';

describe('telemetry config', () => {
  it.each(['abc', '1.5', '-0.1', '10%'])(
    'stops start-up on OTEL_TRACES_SAMPLER_ARG=%s, naming the variable (review)',
    (value) => {
      // The SDK reads a value it cannot parse as 1: every request traced.
      expect(() => validateEnv(TelemetryEnv, { OTEL_TRACES_SAMPLER_ARG: value })).toThrow(
        /OTEL_TRACES_SAMPLER_ARG/,
      );
    },
  );

  it.each(['0', '0.1', '1', '.5', '1e-1'])('takes OTEL_TRACES_SAMPLER_ARG=%s', (value) => {
    expect(validateEnv(TelemetryEnv, { OTEL_TRACES_SAMPLER_ARG: value })).toMatchObject({
      OTEL_TRACES_SAMPLER_ARG: Number(value),
    });
  });
});
