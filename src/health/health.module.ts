import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RateLimitStorageModule } from '../rate-limit/rate-limit.module';
import { HealthController } from './health.controller';

@Module({
  imports: [TerminusModule.forRoot({ logger: false }), RateLimitStorageModule],
  controllers: [HealthController],
})
export class HealthModule {}
