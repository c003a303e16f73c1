// First of all: tracing must patch http, express, pg and ioredis before they load.
import './tracing/register';
import { NestFactory } from '@nestjs/core';
import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Logger } from 'pino';
import { AppModule } from './app.module';
import { setupApp } from './app.setup';
import { createHttpAdapter, timeOutUnfinishedRequests } from './common/http/http-adapter';
import { ShutdownSignal } from './common/lifecycle/shutdown-signal';
import { ANSWER_BEFORE_EXIT_MS } from './common/lifecycle/shutdown-signal';
import { ROOT_LOGGER } from './common/logging/root-logger';
import { type AppConfig, appConfig } from './config/app.config';
import { httpConfig } from './config/http.config';
import { startEmbeddedUnlessConfigured } from './database/embedded-postgres';
import { SPAN_EXPORT_AT_EXIT_MS, stopTracing } from './tracing/tracing';

/** How often a shutdown closes the keep-alive connections that have become idle. */
const IDLE_CONNECTIONS_CHECK_MS = 100;
/** What a shutdown keeps of its time for writing its last lines and exiting. */
const EXIT_MARGIN_MS = 250;

async function bootstrap(): Promise<void> {
  const embedded = await startEmbeddedUnlessConfigured();

  const app = await NestFactory.create<NestExpressApplication>(
    AppModule,
    createHttpAdapter(httpConfig()),
    {
      bodyParser: false,
      bufferLogs: true,
      // A start that fails prints its one `Start-up failed:` line, not Nest's buffered lines in
      // colour on stdout around it (found by review); a start that succeeds flushes them to the
      // JSON logger below.
      autoFlushLogs: false,
      abortOnError: false,
    },
  );
  setupApp(app);
  app.flushLogs();
  const logger = app.get<Logger>(ROOT_LOGGER);
  const config = app.get<AppConfig>(appConfig.KEY);

  let stopping = false;
  const shutdown = async (signal: string) => {
    // A second signal is not a force: npm forwards a terminal's Ctrl-C to a process that got it
    // already from the terminal, so `npm start` sees two.
    if (stopping) return;
    stopping = true;
    const deadline = Date.now() + config.shutdownTimeoutMs;
    logger.info({ signal }, 'shutting down: finishing in-flight requests');
    const shutdownSignal = app.get(ShutdownSignal);
    shutdownSignal.begin();
    const server = app.getHttpServer();
    // Answers from now on close their connection: a client (a load balancer's pool) sends its
    // next request elsewhere instead of on a socket about to go.
    server.prependListener('request', (_request, response) =>
      response.setHeader('Connection', 'close'),
    );
    // A keep-alive connection busy when the server stopped listening stays open once its
    // response is sent (the close only ends those idle at the time): each is closed as it
    // becomes idle, or the shutdown waits for the client to hang up (found by review). Not
    // while still listening: a client may be sending on an idle one (review of the change).
    setInterval(() => {
      if (!server.listening) server.closeIdleConnections();
    }, IDLE_CONNECTIONS_CHECK_MS).unref();
    // Replies still waiting on their model provider are answered 503 before the exit cuts them,
    // and requests whose headers or body are still arriving 408: one stalled upload held every
    // shutdown to its forced exit, REQUEST_TIMEOUT_MS's 30 s being longer than
    // SHUTDOWN_TIMEOUT_MS's 10 (found by review).
    setTimeout(
      () => {
        shutdownSignal.abandon();
        timeOutUnfinishedRequests(app.getHttpAdapter());
      },
      Math.max(config.shutdownTimeoutMs - ANSWER_BEFORE_EXIT_MS, config.shutdownTimeoutMs / 2),
    ).unref();
    setTimeout(() => {
      logger.error('shutdown timed out');
      logger.flush();
      process.exit(1);
    }, config.shutdownTimeoutMs).unref();
    await app.close();
    await embedded?.stop();
    // Within what is left of the shutdown's time: after replies abandoned 3 s before its end,
    // a full wait would pass it (review of the change).
    const left = deadline - Date.now() - EXIT_MARGIN_MS;
    await stopTracing(Math.min(SPAN_EXPORT_AT_EXIT_MS, left)).catch((error: unknown) =>
      logger.warn({ err: error }, 'span export failed'),
    );
    logger.info('stopped');
    logger.flush(() => process.exit(0));
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  // A closed terminal: without a handler Node ends at once (and the embedded database's package
  // stopped it without the shutdown; review of the change).
  process.on('SIGHUP', () => void shutdown('SIGHUP'));
  embedded?.leaveSignalsToCaller();

  await app.listen(config.port);
  logger.info(
    {
      port: config.port,
      database: embedded
        ? `embedded (${embedded.url.replace(/:[^:@/]+@/, ':***@')}, data in ${embedded.dataDir})`
        : 'DATABASE_URL',
    },
    'listening',
  );
}

bootstrap().catch((error: unknown) => {
  process.stderr.write(
    `Start-up failed: ${error instanceof Error ? error.message : String(error)}\n`,
  );
  process.exit(1);
});
