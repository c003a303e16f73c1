import { Module } from '@nestjs/common';
import { JwtModule } from '@nestjs/jwt';
import { PassportModule } from '@nestjs/passport';
import { ApiKeysModule } from '../api-keys/api-keys.module';
import { PasswordResetParticipantsModule } from '../common/password-reset/password-reset-participants.module';
import { type AuthConfig, authConfig } from '../config/auth.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { UsersModule } from '../users/users.module';
import { AccessTokensService, JWT_ALGORITHM, JWT_ISSUER } from './access-tokens.service';
import { AuthController } from './auth.controller';
import { SignOutController } from './sign-out.controller';
import { AuthService } from './auth.service';
import { AuthenticationGuard } from './authentication.guard';
import { CallerResolver } from './caller-resolver.service';
import { EmailVerificationController } from './email-verification.controller';
import { EmailVerificationTokensRepository } from './email-verification-tokens.repository';
import { EmailVerificationService } from './email-verification.service';
import { VerificationMailer } from './verification-mailer.service';
import { LoginAttemptsRepository } from './login-attempts.repository';
import { LoginAttemptsService } from './login-attempts.service';
import { MailModule } from '../mail/mail.module';
import { PasswordResetMailer } from './password-reset-mailer.service';
import { PasswordResetTokensRepository } from './password-reset-tokens.repository';
import { PasswordResetService } from './password-reset.service';
import { JwtStrategy } from './strategies/jwt.strategy';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [
    IdempotencyModule,
    PassportModule,
    JwtModule.registerAsync({
      inject: [authConfig.KEY],
      useFactory: (auth: AuthConfig) => {
        return {
          secret: auth.jwtSecret,
          signOptions: {
            algorithm: JWT_ALGORITHM,
            audience: auth.jwtAudience,
            issuer: JWT_ISSUER,
            expiresIn: auth.jwtTtlSeconds,
          },
          verifyOptions: {
            algorithms: [JWT_ALGORITHM],
            audience: auth.jwtAudience,
            issuer: JWT_ISSUER,
          },
        };
      },
    }),
    MailModule,
    UsersModule,
    OrganizationsModule,
    ApiKeysModule,
    PasswordResetParticipantsModule,
  ],
  controllers: [AuthController, EmailVerificationController, SignOutController],
  providers: [
    LoginAttemptsRepository,
    LoginAttemptsService,
    PasswordResetTokensRepository,
    PasswordResetService,
    EmailVerificationTokensRepository,
    EmailVerificationService,
    VerificationMailer,
    PasswordResetMailer,
    AuthService,
    AccessTokensService,
    JwtStrategy,
    // One instance: app.module.ts registers it as APP_GUARD (after the rate limiter), and the
    // rate limiter asks it, as CallerResolver, who is calling, resolved once per request.
    AuthenticationGuard,
    { provide: CallerResolver, useExisting: AuthenticationGuard },
  ],
  exports: [AccessTokensService, AuthenticationGuard, CallerResolver],
})
export class AuthModule {}
