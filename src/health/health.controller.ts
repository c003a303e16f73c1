import { Controller, Get } from '@nestjs/common';
import {
  ApiOkResponse,
  ApiOperation,
  ApiServiceUnavailableResponse,
  ApiTags,
} from '@nestjs/swagger';
import { HealthCheck } from '@nestjs/terminus';
import { Public } from '../common/auth/auth.decorators';
import { ErrorEnvelopeDto } from '../common/errors/error-envelope';
import { LivenessDto, ReadinessDto } from './dto/health.dto';
import { HealthService, type Readiness } from './health.service';

@ApiTags('health')
@Public()
@Controller('health')
export class HealthController {
  constructor(private readonly health: HealthService) {}

  @Get('live')
  @ApiOperation({ summary: 'Liveness: the process answers' })
  @ApiOkResponse({ type: LivenessDto })
  live() {
    return { status: 'ok' };
  }

  @Get('ready')
  @HealthCheck({ swaggerDocumentation: false })
  @ApiOperation({
    summary: 'Readiness: the database answers',
    description:
      'Redis (when REDIS_URL is set) is reported but does not fail readiness: rate limits fall back to in-process buckets while it is away or slow, and `rate_limit` says `degraded` (overall status `degraded`, still 200).',
  })
  @ApiOkResponse({ type: ReadinessDto })
  @ApiServiceUnavailableResponse({
    description: 'The database is unreachable (`not_ready`)',
    type: ErrorEnvelopeDto,
  })
  ready(): Promise<Readiness> {
    return this.health.readiness();
  }
}
