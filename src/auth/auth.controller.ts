import { Body, Controller, Header, HttpCode, Post, Req } from '@nestjs/common';
import type { Request } from 'express';
import {
  ApiAcceptedResponse,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import { Public } from '../common/auth/auth.decorators';
import { requestIdOf } from '../common/http/request-id';
import { ApiErrors } from '../common/openapi/api-responses';
import { AuthService } from './auth.service';
import {
  ForgotPasswordDto,
  ForgotPasswordResponseDto,
  LoginDto,
  ResetPasswordDto,
  ResetPasswordResponseDto,
} from './dto/login.dto';
import { AccessTokenDto, SignupDto, SignupResponseDto } from './dto/signup.dto';
import { PasswordResetService } from './password-reset.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

@ApiTags('auth')
@Public()
@Controller('v1/auth')
export class AuthController {
  constructor(
    private readonly auth: AuthService,
    private readonly passwordReset: PasswordResetService,
  ) {}

  @Header('Cache-Control', 'no-store')
  @Post('signup')
  @AcceptsIdempotencyKey()
  @HttpCode(201)
  @ApiOperation({ summary: 'Creates a user and their first organization, and logs them in' })
  @ApiCreatedResponse({ type: SignupResponseDto })
  @ApiErrors(400, [409, 'The e-mail address is registered already (`email_taken`)'])
  signup(@Body() body: SignupDto, @Req() request: Request): Promise<SignupResponseDto> {
    return this.auth.signup(body, { requestId: requestIdOf(request), ip: request.ip });
  }

  @Header('Cache-Control', 'no-store')
  @Post('login')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Logs in with e-mail and password',
    description:
      'The 15th failed login for one address within 24 hours locks password login for that address for 24 hours (or until a password reset); the 15th attempt still answers 401, later ones 423.',
  })
  @ApiOkResponse({ type: AccessTokenDto })
  @ApiErrors(
    400,
    [401, 'Wrong e-mail or password (`invalid_credentials`)'],
    [423, 'Password login is locked for this address (`login_locked`)'],
  )
  login(@Body() body: LoginDto): Promise<AccessTokenDto> {
    return this.auth.login(body.email, body.password);
  }

  @Post('forgot-password')
  @AcceptsIdempotencyKey()
  @HttpCode(202)
  @ApiOperation({
    summary: 'E-mails a password reset link when the address has an account',
    description: 'Answers 202 with the same body whether or not the address exists.',
  })
  @ApiAcceptedResponse({ type: ForgotPasswordResponseDto })
  @ApiErrors(400)
  forgotPassword(@Body() body: ForgotPasswordDto): ForgotPasswordResponseDto {
    this.passwordReset.request(body.email);
    return { status: 'reset_requested' };
  }

  @Post('reset-password')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Sets a new password with the token from the e-mail',
    description:
      'Clears the login lockout, ends every access token issued before and unlinks the SSO identities; marks the address verified, and when it was not, revokes the API keys the user made (the account is taken back from whoever registered the address first). A token works once.',
  })
  @ApiOkResponse({ type: ResetPasswordResponseDto })
  @ApiErrors([
    400,
    'Invalid request (`validation_failed`) or an unknown, expired or used token (`invalid_reset_token`)',
  ])
  async resetPassword(@Body() body: ResetPasswordDto): Promise<ResetPasswordResponseDto> {
    await this.passwordReset.reset(body.token, body.new_password);
    return { status: 'password_reset' };
  }
}
