import { Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { APP_FILTER, APP_PIPE } from '@nestjs/core';
import { ApiKeysModule } from './api-keys/api-keys.module';
import { AuthModule } from './auth/auth.module';
import { BillingModule } from './billing/billing.module';
import { AllExceptionsFilter } from './common/errors/all-exceptions.filter';
import { LoggingModule } from './common/logging/logging.module';
import { createValidationPipe } from './common/validation/validation.pipe';
import { configLoaders } from './config';
import { DatabaseModule } from './database/database.module';
import { EndUsersModule } from './end-users/end-users.module';
import { ExportsModule } from './exports/exports.module';
import { HealthModule } from './health/health.module';
import { OrganizationsModule } from './organizations/organizations.module';
import { PersonalitiesModule } from './personalities/personalities.module';
import { RedisModule } from './redis/redis.module';
import { RespondModule } from './respond/respond.module';
import { UsageModule } from './usage/usage.module';
import { VocabulariesModule } from './vocabularies/vocabularies.module';

@Module({
  imports: [
    ConfigModule.forRoot({ isGlobal: true, cache: true, load: configLoaders, ignoreEnvFile: true }),
    LoggingModule,
    DatabaseModule,
    RedisModule,
    HealthModule,
    AuthModule,
    OrganizationsModule,
    ApiKeysModule,
    VocabulariesModule,
    EndUsersModule,
    PersonalitiesModule,
    UsageModule,
    RespondModule,
    ExportsModule,
    BillingModule,
  ],
  providers: [
    { provide: APP_FILTER, useClass: AllExceptionsFilter },
    { provide: APP_PIPE, useFactory: createValidationPipe },
  ],
})
export class AppModule {}
