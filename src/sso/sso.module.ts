import { Module } from '@nestjs/common';
import { AuthModule } from '../auth/auth.module';
import { IdTokenVerifier } from './id-token-verifier.service';
import { MeSsoController, SsoLoginController } from './sso.controller';
import { SsoRepository } from './sso.repository';
import { SsoService } from './sso.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';
import { UsersModule } from '../users/users.module';

@Module({
  imports: [IdempotencyModule, AuthModule, UsersModule],
  controllers: [MeSsoController, SsoLoginController],
  providers: [SsoRepository, SsoService, IdTokenVerifier],
})
export class SsoModule {}
