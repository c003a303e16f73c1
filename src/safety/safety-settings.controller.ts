import { Body, Controller, Get, Param, Patch } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors } from '../common/openapi/api-responses';
import { organizationIdPipe } from '../organizations/dto/path-params';
import { SafetySettingsDto, UpdateSafetySettingsDto } from './dto/safety-settings.dto';
import { SafetySettingsService } from './safety-settings.service';

@ApiTags('safety')
@Controller('v1/organizations/:id/safety')
export class SafetySettingsController {
  constructor(private readonly settings: SafetySettingsService) {}

  @Get()
  @Scopes('read')
  @ApiOperation({
    summary: "The organization's safety settings (any member, or a key of the organization)",
  })
  @ApiOkResponse({ type: SafetySettingsDto })
  @ApiErrors([404, 'Not an organization of the caller'])
  get(
    @Caller() caller: CallerContext,
    @Param('id', organizationIdPipe) organizationId: string,
  ): Promise<SafetySettingsDto> {
    return this.settings.get(caller, organizationId);
  }

  @Patch()
  @Scopes('read')
  @ApiOperation({
    summary:
      'Changes the safety settings (owners and admins, or a key with the admin scope: others 403 `insufficient_scope`)',
  })
  @ApiOkResponse({ type: SafetySettingsDto })
  @ApiErrors(400, [404, 'Not an organization of the caller'])
  update(
    @Caller() caller: CallerContext,
    @Param('id', organizationIdPipe) organizationId: string,
    @Body() body: UpdateSafetySettingsDto,
  ): Promise<SafetySettingsDto> {
    return this.settings.update(caller, organizationId, body);
  }
}
