import { Injectable } from '@nestjs/common';
import type { EntityManager } from 'typeorm';
import { AccessTokensService } from '../auth/access-tokens.service';
import type { UserCaller } from '../common/auth/caller';
import { AppError } from '../common/errors/app-error';
import { Page, toPage } from '../common/pagination/pagination';
import {
  type PasswordReset,
  TakesAccountBack,
} from '../common/password-reset/password-reset-participant';
import { SsoIdentityDto, toSsoIdentityResponse } from './dto/sso.dto';
import { IdTokenVerifier } from './id-token-verifier.service';
import { UsersService } from '../users/users.service';
import { SsoRepository } from './sso.repository';
import { tokenNoLongerValid } from '../users/token-version-held';

@Injectable()
export class SsoService {
  constructor(
    private readonly identities: SsoRepository,
    private readonly verifier: IdTokenVerifier,
    private readonly tokens: AccessTokensService,
    private readonly users: UsersService,
  ) {}

  /**
   * Links the identity to the user. The unique (provider, subject) index decides races, in one
   * statement (SsoRepository.link): of two users linking one identity at once, one INSERT wins
   * (201) and the other gets the winner's row (409); the same user linking twice gets their own
   * row (200). An unlink running beside it cannot make it fail. With the access token's
   * version, a password reset committed since the request was authenticated makes it a 401.
   */
  async link(
    userId: string,
    providerId: string,
    idToken: string,
    tokenVersion?: UserCaller['tokenVersion'],
  ): Promise<{ created: boolean; identity: SsoIdentityDto }> {
    const verified = await this.verifier.verify(providerId, idToken);
    const result = await this.identities.link({
      userId,
      tokenVersion,
      provider: verified.provider,
      subject: verified.subject,
      email: verified.email,
    });
    // A password reset committed since the request was authenticated: its token is ended.
    if (!result) throw tokenNoLongerValid();
    const { created, ...linked } = result;
    if (linked.user_id !== userId) {
      throw new AppError(
        'sso_identity_taken',
        'This identity is already linked to another account',
      );
    }
    return { created, identity: toSsoIdentityResponse(linked) };
  }

  async list(userId: string, limit: number, startingAfter?: string): Promise<Page<SsoIdentityDto>> {
    const rows = await this.identities.findPageForUser(userId, limit, startingAfter);
    return toPage(rows, limit, toSsoIdentityResponse);
  }

  /**
   * A password reset takes the account back: an identity linked by whoever held it, or
   * registered the address first, must not outlive it. Every one is unlinked, in the reset's
   * transaction; a login reads the identity and the token version in one statement, so it sees
   * both before the reset or neither after it.
   */
  @TakesAccountBack()
  async unlinkAtReset(manager: EntityManager, reset: PasswordReset): Promise<undefined> {
    await this.identities.unlinkEvery(manager, reset.userId);
    return undefined;
  }

  /**
   * Unlinks the identity, which ends the access tokens a login through it issued (they name it,
   * AccessTokenPayload.idp): on every instance before the answer, as a password reset does.
   * The user's other tokens, the caller's included, go on (contract §7).
   */
  async unlink(userId: string, id: string): Promise<void> {
    if (!(await this.identities.deleteForUser(userId, id))) throw AppError.notFound('SSO identity');
    await this.users.forgetIdentity(userId, id);
  }

  /** Logs in the linked user. Not subject to the password lockout: no password is involved. */
  async login(providerId: string, idToken: string) {
    const verified = await this.verifier.verify(providerId, idToken);
    const identity = await this.identities.findByProviderSubject(
      verified.provider,
      verified.subject,
    );
    if (!identity) throw AppError.unauthenticated();
    return this.tokens.issue(identity.user_id, identity.token_version, identity.id);
  }
}
