import { createSecretKey } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { Injectable } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import { isUUID } from 'class-validator';
import { ExtractJwt, Strategy } from 'passport-jwt';
import type { CallerContext, Scope } from '../../common/auth/caller';
import { TtlCache } from '../../common/cache/ttl-cache';
import { sha256 } from '../../common/crypto/sha256';
import { AppError } from '../../common/errors/app-error';
import type { AuthConfig } from '../../config/auth.config';
import type { Role } from '../../organizations/entities/membership.entity';
import { OrganizationsService } from '../../organizations/organizations.service';
import { UsersService } from '../../users/users.service';
import { type AccessTokenPayload, JWT_ALGORITHM, JWT_ISSUER } from '../access-tokens.service';

/**
 * How long a token that passed verification is remembered, so repeated requests with it skip
 * passport and the signature check (about a fifth of an authenticated request's CPU). Only the
 * verification is remembered: expiry, token version and membership are checked on every request.
 */
const VERIFIED_TOKEN_CACHE_MS = 60_000;

const tokenKey = (token: string) => sha256(token).toString('base64');

const ROLE_SCOPES: Record<Role, Scope[]> = {
  owner: ['admin'],
  admin: ['admin'],
  member: ['read_write'],
};

/**
 * Access tokens: HS256 only (no `none`, no algorithm confusion), with our audience and issuer, not
 * expired, and of the user's current token version. The organization is X-Organization-Id's, else
 * the user's first.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  private readonly verified = new TtlCache<AccessTokenPayload & { exp: number }>(
    VERIFIED_TOKEN_CACHE_MS,
  );

  constructor(
    config: ConfigService,
    private readonly users: UsersService,
    private readonly organizations: OrganizationsService,
  ) {
    const auth = config.getOrThrow<AuthConfig>('auth');
    super({
      jwtFromRequest: ExtractJwt.fromAuthHeaderAsBearerToken(),
      // A KeyObject, not the string: given a string, jsonwebtoken first tries to parse it as a
      // PEM public key on every verification and catches the failure, which cost three quarters
      // of an authenticated request's throughput (bench/results/auth.json).
      secretOrKey: createSecretKey(Buffer.from(auth.jwtSecret)) as unknown as Buffer,
      algorithms: [JWT_ALGORITHM],
      audience: auth.jwtAudience,
      issuer: JWT_ISSUER,
      ignoreExpiration: false,
      passReqToCallback: true,
    });
  }

  /** Called by passport-jwt once the signature, algorithm, aud, iss and exp have verified. */
  async validate(
    request: Request,
    payload: AccessTokenPayload & { exp?: number },
  ): Promise<CallerContext> {
    if (
      typeof payload.sub !== 'string' ||
      typeof payload.ver !== 'number' ||
      typeof payload.exp !== 'number'
    ) {
      throw AppError.unauthenticated('The access token is not valid');
    }
    const token = ExtractJwt.fromAuthHeaderAsBearerToken()(request);
    if (token) {
      this.verified.set(tokenKey(token), { sub: payload.sub, ver: payload.ver, exp: payload.exp });
    }
    return this.callerFor(request, payload);
  }

  /** The payload of a token verified before and not expired since, or null. */
  recall(token: string): AccessTokenPayload | null {
    const payload = this.verified.get(tokenKey(token));
    return payload && payload.exp * 1000 > Date.now() ? payload : null;
  }

  /** The caller of a verified token: current token version, then the organization's grant. */
  async callerFor(
    request: Pick<IncomingMessage, 'headers'>,
    payload: AccessTokenPayload,
  ): Promise<CallerContext> {
    const requested = request.headers['x-organization-id'];
    const wellFormed =
      requested === undefined || (typeof requested === 'string' && isUUID(requested));
    // Independent lookups (each cached): one round trip's wait, not two, when both miss.
    const [version, grant] = await Promise.all([
      this.users.tokenVersion(payload.sub),
      wellFormed ? this.organizations.membership(payload.sub, requested) : null,
    ]);
    if (version === null || version !== payload.ver) {
      throw AppError.unauthenticated('The access token is no longer valid');
    }
    if (!grant) {
      throw new AppError('not_a_member', 'X-Organization-Id names no organization you belong to');
    }
    return {
      kind: 'user',
      userId: payload.sub,
      organizationId: grant.organizationId,
      scopes: ROLE_SCOPES[grant.role],
    };
  }
}
