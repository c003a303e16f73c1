import { Global, Module } from '@nestjs/common';
import { LoggerModule } from 'nestjs-pino';
import type { DestinationStream, Logger } from 'pino';
import { type AppConfig, appConfig } from '../../config/app.config';
import { type TelemetryConfig, telemetryConfig } from '../../config/telemetry.config';
import {
  createRootLogger,
  createStdoutDestination,
  LOG_DESTINATION,
  ROOT_LOGGER,
} from './root-logger';
import { traceIdMixin } from './trace-id-mixin';

/** Owns the process's single pino instance and its destination. */
@Module({
  providers: [
    // Tests override this token to read the lines the app writes.
    { provide: LOG_DESTINATION, useFactory: createStdoutDestination },
    {
      provide: ROOT_LOGGER,
      inject: [appConfig.KEY, telemetryConfig.KEY, LOG_DESTINATION],
      useFactory: (app: AppConfig, telemetry: TelemetryConfig, destination: DestinationStream) =>
        createRootLogger(app.logLevel, destination, telemetry.tracing ? traceIdMixin : undefined),
    },
  ],
  exports: [ROOT_LOGGER],
})
export class RootLoggerModule {}

/**
 * JSON logs through pino. The HTTP middleware (request id + access line) is mounted first of all
 * in app.setup.ts, so even requests refused by the body parser are logged; nestjs-pino runs in
 * `useExisting` mode and exposes that same request-bound logger to Nest and to services. That
 * middleware also binds the logger into nestjs-pino's request store, so nestjs-pino mounts no
 * middleware of its own (`forRoutes: []`): its catch-all route was one more layer every request
 * walked through Express's router.
 */
@Global()
@Module({
  imports: [
    RootLoggerModule,
    LoggerModule.forRootAsync({
      imports: [RootLoggerModule],
      inject: [ROOT_LOGGER],
      useFactory: (logger: Logger) => ({ pinoHttp: { logger }, useExisting: true, forRoutes: [] }),
    }),
  ],
  exports: [RootLoggerModule, LoggerModule],
})
export class LoggingModule {}
