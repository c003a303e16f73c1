import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiCreatedResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Public } from '../common/auth/auth.decorators';
import { ApiErrors } from '../common/openapi/api-responses';
import { AuthService } from './auth.service';
import { SignupDto, SignupResponseDto } from './dto/signup.dto';

@ApiTags('auth')
@Public()
@Controller('v1/auth')
export class AuthController {
  constructor(private readonly auth: AuthService) {}

  @Post('signup')
  @HttpCode(201)
  @ApiOperation({ summary: 'Creates a user and their first organization, and logs them in' })
  @ApiCreatedResponse({ type: SignupResponseDto })
  @ApiErrors(400, [409, 'The e-mail address is registered already (`email_taken`)'])
  signup(@Body() body: SignupDto): Promise<SignupResponseDto> {
    return this.auth.signup(body);
  }
}
