import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class HttpEnv {
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1000)
  @Max(600_000)
  REQUEST_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1000)
  @Max(600_000)
  HEADERS_TIMEOUT_MS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1000)
  STREAMS_PER_ORG?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(600_000)
  STREAM_IDLE_TIMEOUT_MS?: number;
}

/** Limits that keep slow or stalled clients from holding the server's capacity (contract §14). */
export const httpConfig = registerAs('http', () => {
  const env = validateEnv(HttpEnv);
  const requestTimeoutMs = env.REQUEST_TIMEOUT_MS ?? 30_000;
  const headersTimeoutMs = env.HEADERS_TIMEOUT_MS ?? 10_000;
  if (headersTimeoutMs > requestTimeoutMs) {
    throw new Error(
      'Invalid configuration:\n  HEADERS_TIMEOUT_MS: must not exceed REQUEST_TIMEOUT_MS',
    );
  }
  return {
    requestTimeoutMs,
    headersTimeoutMs,
    /** An idle keep-alive connection is closed after this long. */
    keepAliveTimeoutMs: 5_000,
    streamsPerOrganization: env.STREAMS_PER_ORG ?? 4,
    streamIdleTimeoutMs: env.STREAM_IDLE_TIMEOUT_MS ?? 30_000,
  };
});

export type HttpConfig = ReturnType<typeof httpConfig>;
