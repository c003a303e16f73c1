import { Inject, Injectable } from '@nestjs/common';
import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from 'jose';
import { PinoLogger } from 'nestjs-pino';
import { AppError } from '../common/errors/app-error';
import { isStorableText } from '../common/validation/untrusted-json';
import { type AuthConfig, authConfig, type SsoProviderConfig } from '../config/auth.config';
import { Clock } from '../common/time/clock';

/** Asymmetric algorithms only: an HS256 id_token "signed" with a public key is refused. */
export const ID_TOKEN_ALGORITHMS = ['RS256', 'ES256'];
/** Clock skew tolerated on exp and nbf, between us and the provider. */
const CLOCK_TOLERANCE_SECONDS = 5;
export const JWKS_REFETCH_COOLDOWN_MS = 5_000;

export interface VerifiedIdentity {
  provider: string;
  subject: string;
  email: string | null;
}

const invalidIdToken = () => new AppError('invalid_id_token', 'The id_token could not be verified');

/**
 * Verifies OIDC id_tokens against the provider's JWKS (contract §7): signature, iss, aud, exp,
 * nbf. One jose remote key set per provider, kept for the process: jose caches the keys (10 min)
 * and fetches the JWKS again when a token names a `kid` it does not know, at most every
 * JWKS_REFETCH_COOLDOWN_MS, so made-up kids cannot make us hammer the provider.
 */
@Injectable()
export class IdTokenVerifier {
  private readonly providers: Map<string, SsoProviderConfig>;
  private readonly keySets = new Map<string, JWTVerifyGetKey>();

  constructor(
    @Inject(authConfig.KEY) auth: AuthConfig,
    private readonly clock: Clock,
    private readonly logger: PinoLogger,
  ) {
    this.logger.setContext(IdTokenVerifier.name);
    const { ssoProviders } = auth;
    this.providers = new Map(ssoProviders.map((provider) => [provider.id, provider]));
  }

  async verify(providerId: string, idToken: string): Promise<VerifiedIdentity> {
    const provider = this.providers.get(providerId);
    if (!provider) {
      throw new AppError('unknown_provider', `No SSO provider "${providerId}" is configured`);
    }
    try {
      const { payload } = await jwtVerify(idToken, this.keySet(provider), {
        issuer: provider.issuer,
        audience: provider.audience,
        algorithms: ID_TOKEN_ALGORITHMS,
        requiredClaims: ['sub', 'exp'],
        clockTolerance: CLOCK_TOLERANCE_SECONDS,
        // exp and nbf against the service's time, as every other expiry here.
        currentDate: this.clock.now(),
      });
      // Issued to another client that named this one among its audiences: with several
      // audiences, the authorized party must be this one. With this one alone, any: Google's
      // cross-client sign-in gives the app's client as azp and the backend's as aud.
      const { aud, azp } = payload;
      if (Array.isArray(aud) && aud.length > 1 && azp !== provider.audience) throw invalidIdToken();
      // A claim is stored and compared as text: U+0000 (which PostgreSQL refuses) or an unpaired
      // surrogate (which would be stored as U+FFFD, merging two subjects) makes the token unusable.
      const { sub, email: claimedEmail } = payload;
      if (typeof sub !== 'string' || sub.length === 0 || sub.length > 255 || !isStorableText(sub))
        throw invalidIdToken();
      if (typeof claimedEmail === 'string' && !isStorableText(claimedEmail)) throw invalidIdToken();
      // Longer than an address can be: kept as none rather than cut into another address.
      const email =
        typeof claimedEmail === 'string' && claimedEmail.length <= 254 ? claimedEmail : null;
      return { provider: provider.id, subject: sub, email };
    } catch (error) {
      if (error instanceof AppError) throw error;
      // Still 401 for the caller, but an unreachable JWKS is the provider's outage, not a bad
      // token: operators need to see it.
      if (!(error instanceof errors.JOSEError) || error instanceof errors.JWKSTimeout) {
        this.logger.warn(
          { provider: provider.id, errorName: (error as Error).name },
          'SSO provider keys could not be fetched',
        );
      }
      throw invalidIdToken();
    }
  }

  private keySet(provider: SsoProviderConfig): JWTVerifyGetKey {
    let keySet = this.keySets.get(provider.id);
    if (!keySet) {
      keySet = createRemoteJWKSet(new URL(provider.jwks_uri), {
        timeoutDuration: 5_000,
        cooldownDuration: JWKS_REFETCH_COOLDOWN_MS,
      });
      this.keySets.set(provider.id, keySet);
    }
    return keySet;
  }
}
