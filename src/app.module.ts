import { Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { ApiKeysModule } from './api-keys/api-keys.module';
import { AuthModule } from './auth/auth.module';
import { BillingModule } from './billing/billing.module';
import { AllExceptionsFilter } from './common/errors/all-exceptions.filter';
import { LoggingModule } from './common/logging/logging.module';
import { createValidationPipe } from './common/validation/validation.pipe';
import { SsoModule } from './sso/sso.module';
import { configLoaders } from './config';
import { DatabaseModule } from './database/database.module';
import { HealthModule } from './health/health.module';
import { OrganizationsModule } from './organizations/organizations.module';
import { RedisModule } from './redis/redis.module';
import { VocabulariesModule } from './vocabularies/vocabularies.module';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true, cache: true, load: configLoaders, ignoreEnvFile: true }),
    LoggingModule,
    DatabaseModule,
    RedisModule,
    HealthModule,
    AuthModule,
    SsoModule,
    OrganizationsModule,
    ApiKeysModule,
    VocabulariesModule,
    BillingModule,
  ],
  providers: [
    { provide: APP_FILTER, useClass: AllExceptionsFilter },
    { provide: APP_PIPE, useFactory: createValidationPipe },
  ],
})
export class AppModule {}
