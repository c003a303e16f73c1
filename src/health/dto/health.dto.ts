import { ApiProperty, ApiPropertyOptional } from '@nestjs/swagger';

export class LivenessDto {
  @ApiProperty({ enum: ['ok'] })
  status: 'ok';
}

/** One dependency's state; other fields are details of the check. */
export class HealthCheckDto {
  @ApiProperty({ enum: ['up', 'down', 'degraded'] })
  status: 'up' | 'down' | 'degraded';

  @ApiPropertyOptional({ description: 'What a down or degraded state means for the service' })
  message?: string;

  @ApiPropertyOptional({
    enum: ['redis', 'memory'],
    description: 'rate_limit: where the buckets are kept now',
  })
  store?: 'redis' | 'memory';

  @ApiPropertyOptional({
    format: 'date-time',
    description: 'rate_limit, degraded: since when the buckets are per instance',
  })
  since?: string;
}

export class ReadinessChecksDto {
  @ApiProperty({ type: HealthCheckDto })
  database: HealthCheckDto;

  @ApiPropertyOptional({ type: HealthCheckDto, description: 'When REDIS_URL is set' })
  redis?: HealthCheckDto;

  @ApiPropertyOptional({
    type: HealthCheckDto,
    description:
      'When REDIS_URL is set: `degraded` while rate limits fall back to per-instance buckets (with `store` and `since`)',
  })
  rate_limit?: HealthCheckDto;
}

export class ReadinessDto {
  @ApiProperty({
    enum: ['ok', 'degraded'],
    description: '`degraded`: Redis is down or rate limits use per-instance buckets (still 200)',
  })
  status: 'ok' | 'degraded';

  @ApiProperty({ type: ReadinessChecksDto })
  checks: ReadinessChecksDto;
}
