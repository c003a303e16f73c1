import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { RateLimitStorageModule } from '../rate-limit/rate-limit.module';
import { HealthController } from './health.controller';
import { HealthService } from './health.service';

@Module({
  imports: [TerminusModule.forRoot({ logger: false }), RateLimitStorageModule],
  controllers: [HealthController],
  providers: [HealthService],
})
export class HealthModule {}
