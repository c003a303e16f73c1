import { Controller, HttpCode, Post } from '@nestjs/common';
import { ApiNoContentResponse, ApiOperation, ApiTags } from '@nestjs/swagger';
import { UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';
import { UsersService } from '../users/users.service';

/**
 * Signing out: the access token the request carries ends (docs/identity.md, "Signing out"). Apart
 * from AuthController, whose routes are public: this one needs the token it ends.
 */
@ApiTags('auth')
@UserOnly()
@Controller('v1/auth')
export class SignOutController {
  constructor(private readonly users: UsersService) {}

  @Post('logout')
  @AcceptsIdempotencyKey()
  @HttpCode(204)
  @ApiOperation({
    summary: 'Ends the access token the request carries',
    description:
      'From the next request on, on every instance, the token is refused (401); the user’s other access tokens, and the API keys, go on. A password reset ends them all.',
  })
  @ApiNoContentResponse()
  async logout(@ActingUser() caller: ActingUserCaller): Promise<void> {
    if (!caller.token) throw AppError.unauthenticated();
    await this.users.signOut(caller.userId, caller.token.hash, caller.token.expiresAt);
  }
}
