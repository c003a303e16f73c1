import { Module } from '@nestjs/common';
import { ConfigService } from '@nestjs/config';
import { JwtModule } from '@nestjs/jwt';
import { PassportModule } from '@nestjs/passport';
import { ApiKeysModule } from '../api-keys/api-keys.module';
import type { AuthConfig } from '../config/auth.config';
import { OrganizationsModule } from '../organizations/organizations.module';
import { UsersModule } from '../users/users.module';
import { AccessTokensService, JWT_ALGORITHM, JWT_ISSUER } from './access-tokens.service';
import { AuthController } from './auth.controller';
import { AuthService } from './auth.service';
import { CallerResolver } from './caller-resolver.service';
import { JwtStrategy } from './strategies/jwt.strategy';

@Module({
  imports: [
    PassportModule,
    JwtModule.registerAsync({
      inject: [ConfigService],
      useFactory: (config: ConfigService) => {
        const auth = config.getOrThrow<AuthConfig>('auth');
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
    UsersModule,
    OrganizationsModule,
    ApiKeysModule,
  ],
  controllers: [AuthController],
  providers: [
    AuthService,
    AccessTokensService,
    JwtStrategy,
    CallerResolver,
    // AuthenticationGuard is registered as APP_GUARD in app.module.ts, after the rate limiter.
  ],
  exports: [AccessTokensService, CallerResolver],
})
export class AuthModule {}
