import { Injectable, OnModuleInit } from '@nestjs/common';
import { AppError } from '../common/errors/app-error';
import { Database } from '../database/database';
import { OrganizationsService } from '../organizations/organizations.service';
import { UsersService } from '../users/users.service';
import { AccessTokensService } from './access-tokens.service';
import { EmailVerificationService } from './email-verification.service';
import { SignupDto, SignupResponseDto } from './dto/signup.dto';
import { LoginAttemptsService } from './login-attempts.service';
import { PasswordResetService } from './password-reset.service';
import { decoyPasswordHash, hashPassword, verifyPassword } from './passwords';

@Injectable()
export class AuthService implements OnModuleInit {
  constructor(
    private readonly database: Database,
    private readonly users: UsersService,
    private readonly organizations: OrganizationsService,
    private readonly tokens: AccessTokensService,
    private readonly loginAttempts: LoginAttemptsService,
    private readonly verification: EmailVerificationService,
    private readonly passwordReset: PasswordResetService,
  ) {}

  /** The decoy hash is made now, so the first unknown address does not take twice as long. */
  async onModuleInit(): Promise<void> {
    await decoyPasswordHash();
  }

  /**
   * Password login under the 15/24h lockout (see LoginAttemptsService). Unknown addresses are
   * counted and checked against a decoy hash, so neither the status sequence nor the time taken
   * tells whether an address has an account.
   */
  async login(rawEmail: string, password: string) {
    const email = rawEmail.trim();
    const gate = await this.loginAttempts.begin(email);
    if (gate.refused) {
      throw new AppError(
        'login_locked',
        'Password login for this address is locked after too many failed attempts; reset the password or try again later',
      );
    }
    const user = await this.users.findByEmail(email);
    const matches = await verifyPassword(
      user?.passwordHash ?? (await decoyPasswordHash()),
      password,
    );
    if (!user || !matches) {
      // The attempt that set the lock failed: the notice goes out, off the request (the answer
      // says nothing of whether the address has an account). One that succeeds lifts the lock.
      if (gate.lockedNow) this.passwordReset.sendLockoutNotice(email);
      throw new AppError('invalid_credentials', 'The e-mail address or password is wrong');
    }
    await this.loginAttempts.succeeded(email);
    return this.tokens.issue(user.id, user.tokenVersion);
  }

  /**
   * Creates the user and a first organization they own, in one transaction; once committed, the
   * verification link is mailed (after the answer). `origin`: the request, for the
   * organization's first audit event.
   */
  async signup(
    dto: SignupDto,
    origin: { requestId?: string; ip?: string } = {},
  ): Promise<SignupResponseDto> {
    const passwordHash = await hashPassword(dto.password);
    const answer = await this.database.transaction(async (manager) => {
      const user = await this.users.createIfEmailFree(manager, {
        email: dto.email.trim(),
        name: dto.name ?? null,
        passwordHash,
      });
      if (!user)
        throw new AppError('email_taken', 'An account with this e-mail address already exists');
      const organization = await this.organizations.createWithOwner(
        manager,
        { userId: user.id, ...origin },
        dto.organization_name ?? `${dto.name ?? dto.email}'s organization`,
      );
      return {
        user: {
          id: user.id,
          email: user.email,
          name: user.name,
          created_at: user.createdAt.toISOString(),
        },
        organization,
        ...this.tokens.issue(user.id, user.tokenVersion),
      };
    });
    this.verification.requestLink(answer.user.id);
    return answer;
  }
}
