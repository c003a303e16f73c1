import { Global, Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/**
 * Global, so that any feature module can inject MetricsService and register its own series
 * (rate limiter, billing, respond, erasure) without importing this module.
 */
@Global()
@Module({ providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule {}
