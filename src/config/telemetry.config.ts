import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import {
  IsIn,
  IsInt,
  IsIP,
  IsNumber,
  IsOptional,
  IsString,
  IsUrl,
  Max,
  Min,
} from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

/** A decimal number as the SDK reads one: `0.25`, `.5`, `1e-1`, `1`. */
const RATIO = /^\s*(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$/;

const OTLP_URL = { require_tld: false, require_protocol: true, protocols: ['http', 'https'] };

/**
 * Metrics and tracing. The OTEL_* variables are read by the OpenTelemetry SDK itself
 * (src/tracing/tracing.ts); they are declared here so a bad value stops start-up with its name,
 * and so the deployment files can be checked to wire every one of them.
 */
export class TelemetryEnv {
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(65535)
  METRICS_PORT?: number;

  /**
   * The address the metrics server binds: unset, every interface (a container's scraper reaches
   * the pod's own address); `127.0.0.1` on a host where only a local agent may read it.
   */
  @IsOptional()
  @IsIP(undefined, { message: 'METRICS_HOST must be an IPv4 or IPv6 address' })
  METRICS_HOST?: string;

  @IsOptional()
  @IsUrl(OTLP_URL)
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;

  @IsOptional()
  @IsUrl(OTLP_URL)
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?: string;

  // OTLP over HTTP only: protobuf (the SDK's default) or JSON.
  @IsOptional()
  @IsIn(['http/protobuf', 'http/json'])
  OTEL_EXPORTER_OTLP_PROTOCOL?: string;

  @IsOptional()
  @IsString()
  OTEL_EXPORTER_OTLP_HEADERS?: string;

  @IsOptional()
  @IsString()
  OTEL_SERVICE_NAME?: string;

  @IsOptional()
  @IsString()
  OTEL_RESOURCE_ATTRIBUTES?: string;

  @IsOptional()
  @IsIn([
    'always_on',
    'always_off',
    'traceidratio',
    'parentbased_always_on',
    'parentbased_always_off',
    'parentbased_traceidratio',
  ])
  OTEL_TRACES_SAMPLER?: string;

  // The ratio of the *traceidratio samplers, the only ones above that take an argument: the SDK
  // falls back to 1 (every request traced) for a value it cannot read.
  @IsOptional()
  @Transform(({ value }: { value: unknown }) =>
    typeof value === 'string' && RATIO.test(value) ? Number(value) : value,
  )
  @IsNumber({}, { message: 'OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1' })
  @Min(0)
  @Max(1)
  OTEL_TRACES_SAMPLER_ARG?: number;
}

/** Tracing is on when an OTLP endpoint is given (an empty value counts as unset). */
export function tracingEnabled(env: TelemetryEnv): boolean {
  return Boolean(env.OTEL_EXPORTER_OTLP_ENDPOINT || env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT);
}

export const telemetryConfig = registerAs('telemetry', () => {
  const env = validateEnv(TelemetryEnv);
  return {
    /** 0: no metrics server and nothing recorded per request. */
    metricsPort: env.METRICS_PORT ?? 9464,
    /** Undefined (unset or empty): every interface. */
    metricsHost: env.METRICS_HOST,
    tracing: tracingEnabled(env),
  };
});

export type TelemetryConfig = ReturnType<typeof telemetryConfig>;
