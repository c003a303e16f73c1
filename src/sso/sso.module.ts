import { Module } from '@nestjs/common';
import { TypeOrmModule } from '@nestjs/typeorm';
import { AuthModule } from '../auth/auth.module';
import { UsersModule } from '../users/users.module';
import { SsoIdentity } from './entities/sso-identity.entity';
import { IdTokenVerifier } from './id-token-verifier.service';
import { MeSsoController, SsoLoginController } from './sso.controller';
import { SsoRepository } from './sso.repository';
import { SsoService } from './sso.service';
import { IdempotencyModule } from '../idempotency/idempotency.module';

@Module({
  imports: [IdempotencyModule, TypeOrmModule.forFeature([SsoIdentity]), AuthModule, UsersModule],
  controllers: [MeSsoController, SsoLoginController],
  providers: [SsoRepository, SsoService, IdTokenVerifier],
})
export class SsoModule {}
