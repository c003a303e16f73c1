import { Body, Controller, Get, Param, Patch } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors } from '../common/openapi/api-responses';
import { organizationIdPipe } from '../organizations/dto/path-params';
import { LimitsDto, UpdateLimitsDto } from './dto/limits.dto';
import { LimitsService } from './limits.service';

@ApiTags('spend')
@Controller('v1/organizations/:id/limits')
export class LimitsController {
  constructor(private readonly limits: LimitsService) {}

  @Get()
  @Scopes('read')
  @ApiOperation({
    summary: "The organization's spend limits (any member, or a key of the organization)",
  })
  @ApiOkResponse({ type: LimitsDto })
  @ApiErrors([404, 'Not an organization of the caller'])
  get(
    @Caller() caller: CallerContext,
    @Param('id', organizationIdPipe) organizationId: string,
  ): Promise<LimitsDto> {
    return this.limits.get(caller, organizationId);
  }

  @Patch()
  @Scopes('read')
  @ApiOperation({
    summary:
      'Changes the spend limits (owners and admins, or a key with the admin scope: others 403 `insufficient_scope`); null removes a limit',
  })
  @ApiOkResponse({ type: LimitsDto })
  @ApiErrors(400, [404, 'Not an organization of the caller'])
  update(
    @Caller() caller: CallerContext,
    @Param('id', organizationIdPipe) organizationId: string,
    @Body() body: UpdateLimitsDto,
  ): Promise<LimitsDto> {
    return this.limits.update(caller, organizationId, body);
  }
}
