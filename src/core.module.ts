import { type DynamicModule, Module } from '@nestjs/common';
import { ConfigModule } from '@nestjs/config';
import { CachesModule } from './common/cache/caches';
import { ClockModule } from './common/time/clock';
import { BackgroundJobsModule, type ProcessRole } from './common/time/background-jobs';
import { ShutdownSignalModule } from './common/lifecycle/shutdown-signal';
import { LoggingModule } from './common/logging/logging.module';
import { configLoaders } from './config';
import { DatabaseModule } from './database/database.module';
import { MetricsModule } from './metrics/metrics.module';
import { RedisModule } from './redis/redis.module';

/**
 * The global parts every feature module may inject (configuration, logger, clock, the shutdown's
 * signal, background jobs, metrics, database, Redis, caches), one list for the server (AppModule) and the commands of
 * `node dist/cli.js`, so that a feature module works the same in both.
 */
@Module({})
export class CoreModule {
  static forRole(role: ProcessRole): DynamicModule {
    return {
      module: CoreModule,
      imports: [
        ConfigModule.forRoot({
          isGlobal: true,
          cache: true,
          load: configLoaders,
          ignoreEnvFile: true,
        }),
        LoggingModule,
        ClockModule,
        ShutdownSignalModule,
        BackgroundJobsModule.forRole(role),
        MetricsModule,
        DatabaseModule,
        RedisModule,
        CachesModule,
      ],
    };
  }
}
