import { Body, Controller, HttpCode, Post } from '@nestjs/common';
import { ApiAcceptedResponse, ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { Public, UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { ApiErrors } from '../common/openapi/api-responses';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import { ResendVerificationResponseDto, VerifyEmailDto } from './dto/verify-email.dto';
import { EmailVerificationService } from './email-verification.service';

@ApiTags('auth')
@Controller('v1/auth')
export class EmailVerificationController {
  constructor(private readonly verification: EmailVerificationService) {}

  @Public()
  @Post('verify-email')
  @AcceptsIdempotencyKey()
  @HttpCode(204)
  @ApiOperation({
    summary: 'Verifies the e-mail address with the token of the link mailed at sign-up',
    description: 'A token works once and for 24 hours.',
  })
  @ApiNoContentResponse()
  @ApiErrors([400, 'Invalid request, or an unknown, expired or used token (`validation_failed`)'])
  async verify(@Body() body: VerifyEmailDto): Promise<void> {
    await this.verification.verify(body.token);
  }

  @UserOnly()
  @Post('resend-verification')
  @AcceptsIdempotencyKey()
  @HttpCode(202)
  @ApiOperation({
    summary: 'Mails the logged-in user a new verification link (none once verified)',
    description: 'Draws from the per-IP auth bucket (RATE_LIMIT_AUTH_*).',
  })
  @ApiAcceptedResponse({ type: ResendVerificationResponseDto })
  resend(@ActingUser() caller: ActingUserCaller): ResendVerificationResponseDto {
    this.verification.requestLink(caller.userId);
    return { status: 'verification_requested' };
  }
}
