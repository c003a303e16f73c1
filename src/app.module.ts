import { Module } from '@nestjs/common';
import { APP_FILTER, APP_GUARD, APP_PIPE } from '@nestjs/core';
import { ApiKeysModule } from './api-keys/api-keys.module';
import { AuthModule } from './auth/auth.module';
import { AuthenticationGuard } from './auth/authentication.guard';
import { BillingModule } from './billing/billing.module';
import { AllExceptionsFilter } from './common/errors/all-exceptions.filter';
import { BodilessRouteGuard } from './common/http/bodiless-route.guard';
import { StreamsModule } from './common/streams/streams.module';
import { createValidationPipe } from './common/validation/validation.pipe';
import { SsoModule } from './sso/sso.module';
import { ConsoleModule } from './console/console.module';
import { CoreModule } from './core.module';
import { EndUsersModule } from './end-users/end-users.module';
import { MemoryModule } from './memory/memory.module';
import { ExportsModule } from './exports/exports.module';
import { HealthModule } from './health/health.module';
import { IdempotencyModule } from './idempotency/idempotency.module';
import { KnowledgeModule } from './knowledge/knowledge.module';
import { OrganizationsModule } from './organizations/organizations.module';
import { PersonalitiesModule } from './personalities/personalities.module';
import { RateLimitGuard } from './rate-limit/rate-limit.guard';
import { RateLimitModule } from './rate-limit/rate-limit.module';
import { RespondModule } from './respond/respond.module';
import { SafetyModule } from './safety/safety.module';
import { SpendModule } from './spend/spend.module';
import { UsageModule } from './usage/usage.module';
import { VocabulariesModule } from './vocabularies/vocabularies.module';
import { WebhooksModule } from './webhooks/webhooks.module';

@Module({
  imports: [
    CoreModule.forRole('server'),
    StreamsModule,
    HealthModule,
    AuthModule,
    SsoModule,
    OrganizationsModule,
    ApiKeysModule,
    VocabulariesModule,
    EndUsersModule,
    MemoryModule,
    PersonalitiesModule,
    KnowledgeModule,
    UsageModule,
    SafetyModule,
    SpendModule,
    RespondModule,
    ExportsModule,
    BillingModule,
    WebhooksModule,
    RateLimitModule,
    IdempotencyModule,
    ConsoleModule,
  ],
  providers: [
    { provide: APP_FILTER, useClass: AllExceptionsFilter },
    { provide: APP_PIPE, useFactory: createValidationPipe },
    // Global guards run in the order registered, and only registering them in one place makes
    // that order certain: the rate limiter first, so 401/403 answers carry its headers and
    // floods of bad credentials are throttled per address; then deny-by-default authentication.
    { provide: APP_GUARD, useClass: RateLimitGuard },
    { provide: APP_GUARD, useExisting: AuthenticationGuard },
    // After authentication, so a caller without access learns nothing about a route's body.
    { provide: APP_GUARD, useClass: BodilessRouteGuard },
  ],
})
export class AppModule {}
