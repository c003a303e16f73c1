import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Scopes } from '../common/auth/auth.decorators';
import { Caller, type CallerContext } from '../common/auth/caller';
import { ApiErrors } from '../common/openapi/api-responses';
import { RespondDto, RespondResponseDto } from './dto/respond.dto';
import { RespondService } from './respond.service';

@ApiTags('respond')
@Controller('v1/respond')
export class RespondController {
  constructor(private readonly respondService: RespondService) {}

  @Post()
  @HttpCode(200)
  @Scopes('read_write')
  @ApiOperation({
    summary:
      'A personality answers an end user (created on first contact); the exchange is remembered and the relationship counted for the month',
  })
  @ApiOkResponse({ type: RespondResponseDto })
  @ApiErrors(
    400,
    [404, 'The personality is not one of the organization'],
    [409, 'The user_id is under deletion (`end_user_under_deletion`)'],
  )
  respond(@Caller() caller: CallerContext, @Body() body: RespondDto): Promise<RespondResponseDto> {
    return this.respondService.respond(caller.organizationId, body);
  }
}
