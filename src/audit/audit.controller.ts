import { Controller, Get, Query } from '@nestjs/common';
import { ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { Page } from '../common/pagination/pagination';
import { AuditService } from './audit.service';
import { AuditEventDto, AuditEventQueryDto } from './dto/audit-event.dto';

@ApiTags('audit')
@Scopes('admin')
@Controller('v1/audit-events')
export class AuditController {
  constructor(private readonly audit: AuditService) {}

  @Get()
  @ApiOperation({ summary: "The organization's audit log, newest first" })
  @ApiPage(AuditEventDto)
  @ApiErrors(400)
  list(
    @Caller() caller: CallerContext,
    @Query() query: AuditEventQueryDto,
  ): Promise<Page<AuditEventDto>> {
    return this.audit.list(caller.organizationId, query.limit, query.starting_after, query.action);
  }
}
