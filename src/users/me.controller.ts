import { Controller, Get } from '@nestjs/common';
import { ApiOkResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { MeDto, toMeResponse } from './dto/me.dto';
import { UsersService } from './users.service';

@ApiTags('me')
@UserOnly()
@Controller('v1/me')
export class MeController {
  constructor(private readonly users: UsersService) {}

  @Get()
  @ApiOperation({ summary: 'The logged-in user, with whether their e-mail address is verified' })
  @ApiOkResponse({ type: MeDto })
  async me(@ActingUser() caller: ActingUserCaller): Promise<MeDto> {
    const user = await this.users.findById(caller.userId);
    if (!user) throw AppError.unauthenticated();
    return toMeResponse(user);
  }
}
