import {
  Body,
  Controller,
  Delete,
  Get,
  Header,
  HttpCode,
  Param,
  Post,
  Query,
  Res,
} from '@nestjs/common';
import {
  ApiCreatedResponse,
  ApiNoContentResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import type { Response } from 'express';
import { AccessTokenDto } from '../auth/dto/signup.dto';
import { Public, UserOnly } from '../common/auth/auth.decorators';
import { ActingUser, type ActingUserCaller } from '../common/auth/caller';
import { ApiErrors, ApiPage } from '../common/openapi/api-responses';
import { IdListQueryDto, Page } from '../common/pagination/pagination';
import { ssoIdentityIdPipe, SsoIdentityDto, SsoTokenDto } from './dto/sso.dto';
import { SsoService } from './sso.service';
import { AcceptsIdempotencyKey } from '../idempotency/accepts-idempotency-key.decorator';

@ApiTags('sso')
@UserOnly()
@Controller('v1/me/sso')
export class MeSsoController {
  constructor(private readonly sso: SsoService) {}

  @Post('link')
  @AcceptsIdempotencyKey()
  @ApiOperation({
    summary: 'Links an SSO identity (verified OIDC id_token) to the authenticated user',
  })
  @ApiCreatedResponse({ type: SsoIdentityDto, description: 'Newly linked' })
  @ApiOkResponse({ type: SsoIdentityDto, description: 'Already linked to this user' })
  @ApiErrors(
    [
      400,
      'Invalid request (`validation_failed`) or a provider that is not configured (`unknown_provider`)',
    ],
    [
      401,
      'No valid access token (`unauthenticated`) or an id_token that fails verification (`invalid_id_token`)',
    ],
    [409, 'The identity is linked to another user (`sso_identity_taken`)'],
  )
  async link(
    @ActingUser() caller: ActingUserCaller,
    @Body() body: SsoTokenDto,
    @Res({ passthrough: true }) response: Response,
  ): Promise<SsoIdentityDto> {
    const { created, identity } = await this.sso.link(
      caller.userId,
      body.provider,
      body.id_token,
      caller.tokenVersion,
    );
    response.status(created ? 201 : 200);
    return identity;
  }

  @Get()
  @ApiOperation({ summary: "The authenticated user's linked SSO identities" })
  @ApiPage(SsoIdentityDto)
  @ApiErrors(400)
  list(
    @ActingUser() caller: ActingUserCaller,
    @Query() query: IdListQueryDto,
  ): Promise<Page<SsoIdentityDto>> {
    return this.sso.list(caller.userId, query.limit, query.starting_after);
  }

  @Delete(':id')
  @HttpCode(204)
  @ApiOperation({
    summary: 'Unlinks one of the authenticated user’s SSO identities',
    description:
      'Also ends the access tokens a login through that identity issued; the user’s other sessions, this one included when it came from elsewhere, go on.',
  })
  @ApiNoContentResponse()
  @ApiErrors(404)
  async unlink(
    @ActingUser() caller: ActingUserCaller,
    @Param('id', ssoIdentityIdPipe) id: string,
  ): Promise<void> {
    await this.sso.unlink(caller.userId, id);
  }
}

@ApiTags('auth')
@Public()
@Controller('v1/auth/sso')
export class SsoLoginController {
  constructor(private readonly sso: SsoService) {}

  @Header('Cache-Control', 'no-store')
  @Post('login')
  @AcceptsIdempotencyKey()
  @HttpCode(200)
  @ApiOperation({
    summary: 'Logs in the user a verified SSO identity is linked to',
    description: 'Not subject to the password-login lockout.',
  })
  @ApiOkResponse({ type: AccessTokenDto })
  @ApiErrors(
    [
      400,
      'Invalid request (`validation_failed`) or a provider that is not configured (`unknown_provider`)',
    ],
    [
      401,
      'The id_token fails verification (`invalid_id_token`) or the identity is not linked (`unauthenticated`)',
    ],
  )
  login(@Body() body: SsoTokenDto): Promise<AccessTokenDto> {
    return this.sso.login(body.provider, body.id_token);
  }
}
