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
}

@Injectable()
export class AccessTokensService {
  constructor(
    private readonly jwt: JwtService,
    @Inject(authConfig.KEY) private readonly auth: ConfigType<typeof authConfig>,
  ) {}

  issue(userId: string, tokenVersion: number) {
    const { jwtTtlSeconds } = this.auth;
    const payload: AccessTokenPayload = { sub: userId, ver: tokenVersion };
    return {
      access_token: this.jwt.sign(payload),
      token_type: 'Bearer' as const,
      expires_in: jwtTtlSeconds,
    };
  }
}
