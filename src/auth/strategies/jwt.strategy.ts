import { createSecretKey } from 'node:crypto';
import { Inject, Injectable } from '@nestjs/common';
import type { ConfigType } from '@nestjs/config';
import { PassportStrategy } from '@nestjs/passport';
import type { Request } from 'express';
import { isUUID } from 'class-validator';
import { ExtractJwt, Strategy } from 'passport-jwt';
import type { ActingUserCaller } from '../../common/auth/caller';
import { AppError } from '../../common/errors/app-error';
import { authConfig } from '../../config/auth.config';
import { ROLE_SCOPES } from '../../organizations/organization-access';
import { OrganizationsService } from '../../organizations/organizations.service';
import { UsersService } from '../../users/users.service';
import { type AccessTokenPayload, JWT_ALGORITHM, JWT_ISSUER } from '../access-tokens.service';
import { tokenNoLongerValid } from '../../users/token-version-held';
import { sha256 } from '../../common/crypto/sha256';

/** The bearer credential of the request's Authorization header. */
const bearerToken = ExtractJwt.fromAuthHeaderAsBearerToken();

/**
 * Access tokens: HS256 only (no `none`, no algorithm confusion), with our audience and issuer, not
 * expired (passport-jwt checks all of it), then of the user's current token version and for an
 * organization the user belongs to: X-Organization-Id's, else the user's first, else (a user
 * who belongs to none) for no organization. AuthGuard('jwt')
 * (AuthenticationGuard) runs it for every bearer credential that is not an API key.
 */
@Injectable()
export class JwtStrategy extends PassportStrategy(Strategy, 'jwt') {
  constructor(
    @Inject(authConfig.KEY) auth: ConfigType<typeof authConfig>,
    private readonly users: UsersService,
    private readonly organizations: OrganizationsService,
  ) {
    super({
      jwtFromRequest: bearerToken,
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

  /**
   * Called by passport-jwt once the signature, algorithm, aud, iss and exp have verified; what it
   * answers becomes request.user. The token version and the membership come from their services'
   * caches (a few seconds, or until Redis says they changed), so a revoked token or a removed
   * member is refused from the next request on.
   */
  async validate(
    request: Request,
    payload: AccessTokenPayload & { exp?: number },
  ): Promise<ActingUserCaller> {
    if (
      typeof payload.sub !== 'string' ||
      typeof payload.ver !== 'number' ||
      typeof payload.exp !== 'number' ||
      (payload.idp !== undefined && typeof payload.idp !== 'string')
    ) {
      throw AppError.unauthenticated('The access token is not valid');
    }
    const requested = request.headers['x-organization-id'];
    const wellFormed =
      requested === undefined || (typeof requested === 'string' && isUUID(requested));
    // Verified by passport-jwt from this very header: its hash names the token for a sign-out.
    const raw = bearerToken(request);
    if (!raw) throw AppError.unauthenticated('The access token is not valid');
    const token = { hash: sha256(raw), expiresAt: new Date(payload.exp * 1000) };
    // Independent lookups (each cached): one round trip's wait, not several, when they miss.
    const [version, grant, linked, signedOut] = await Promise.all([
      this.users.tokenVersion(payload.sub),
      wellFormed ? this.organizations.membership(payload.sub, requested) : null,
      // A token an SSO login issued ends when its identity is unlinked.
      payload.idp === undefined ? true : this.users.identityLinked(payload.sub, payload.idp),
      this.users.signedOut(token.hash),
    ]);
    if (version === null || version !== payload.ver || !linked || signedOut) {
      throw tokenNoLongerValid();
    }
    if (!grant && requested !== undefined) {
      throw new AppError('not_a_member', 'X-Organization-Id names no organization you belong to');
    }
    if (!grant) {
      // A member of none: AuthenticationGuard opens @UserOnly() routes to them, nothing else.
      return {
        kind: 'user',
        userId: payload.sub,
        tokenVersion: payload.ver,
        token,
        organizationId: null,
        scopes: [],
      };
    }
    return {
      kind: 'user',
      userId: payload.sub,
      tokenVersion: payload.ver,
      token,
      organizationId: grant.organizationId,
      scopes: ROLE_SCOPES[grant.role],
    };
  }
}
