import type { NestExpressApplication } from '@nestjs/platform-express';
import { Logger } from 'nestjs-pino';
import type { Logger as Pino } from 'pino';
import { BEFORE_ERROR_REPLY } from './common/errors/before-error-reply';
import { chargedOutsideNest } from './common/http/charged-outside-nest';
import { configureHttp } from './common/http/configure-http';
import { ROOT_LOGGER } from './common/logging/root-logger';
import {
  OPENAPI_DOCUMENT_PATH,
  OPENAPI_UI_PATH,
  setupOpenApi,
} from './common/openapi/setup-openapi';
import { type AppConfig, appConfig } from './config/app.config';
import { type MemoryConfig, memoryConfig } from './config/memory.config';
import { IMPORT_ROUTE } from './exports/import.controller';
import { KNOWLEDGE_JSON_MAX_BYTES } from './knowledge/knowledge-bodies';
import { KNOWLEDGE_JSON_ROUTES, KNOWLEDGE_UPLOAD_ROUTE } from './knowledge/knowledge.controller';
import { MetricsService } from './metrics/metrics.service';
import { consoleHeaders } from './console/console-headers';
import { docsHeaders } from './common/openapi/docs-headers';

/** Everything main.ts and the e2e tests both do to a created app, so they behave alike. */
export function setupApp(app: NestExpressApplication): void {
  app.useLogger(app.get(Logger));
  const { trustProxy, logHashKey } = app.get<AppConfig>(appConfig.KEY);
  const { importMaxBytes } = app.get<MemoryConfig>(memoryConfig.KEY);
  // First: every /console and /docs response carries them, whichever middleware answers it.
  app.use(consoleHeaders);
  app.use(docsHeaders);
  configureHttp(
    app,
    app.get<Pino>(ROOT_LOGGER),
    { trustProxy, logHashKey },
    app.get(MetricsService).responseObserver(),
    {
      documentRoutes: new Map([[IMPORT_ROUTE, importMaxBytes]]),
      largeJsonRoutes: [{ route: KNOWLEDGE_JSON_ROUTES, limitBytes: KNOWLEDGE_JSON_MAX_BYTES }],
      formRoutes: new Set([KNOWLEDGE_UPLOAD_ROUTE]),
    },
  );
  app.use(
    [OPENAPI_DOCUMENT_PATH, OPENAPI_UI_PATH],
    chargedOutsideNest(app.get(BEFORE_ERROR_REPLY, { strict: false })),
  );
  setupOpenApi(app);
}
