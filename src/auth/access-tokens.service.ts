import { randomUUID } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { JwtService } from '@nestjs/jwt';
import { authConfig } from '../config/auth.config';

export const JWT_ALGORITHM = 'HS256';
export const JWT_ISSUER = 'personality-api';

export interface AccessTokenPayload {
  sub: string;
  /** The user's token version when issued; a password reset raises it. */
  ver: number;
  /** The SSO identity whose login issued the token, if one did: unlinking it ends the token. */
  idp?: string;
  /**
   * Random: two tokens issued to one user in one second differ, so signing out of one
   * (POST /v1/auth/logout, by the token's hash) leaves the other.
   */
  jti?: string;
}

@Injectable()
export class AccessTokensService {
  constructor(
    private readonly jwt: JwtService,
    @Inject(authConfig.KEY) private readonly auth: ConfigType<typeof authConfig>,
  ) {}

  /** `identityId`: the SSO identity a login went through (AccessTokenPayload.idp). */
  issue(userId: string, tokenVersion: number, identityId?: string) {
    const { jwtTtlSeconds } = this.auth;
    const payload: AccessTokenPayload = { sub: userId, ver: tokenVersion, jti: randomUUID() };
    if (identityId !== undefined) payload.idp = identityId;
    return {
      access_token: this.jwt.sign(payload),
      token_type: 'Bearer' as const,
      expires_in: jwtTtlSeconds,
    };
  }
}
