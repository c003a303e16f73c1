import type { NestExpressApplication } from '@nestjs/platform-express';
import type { Logger } from 'pino';
import {
  createHttpLogger,
  createRefusalLogger,
  type ResponseObserver,
} from '../logging/http-logger';
import { observeRefusals } from './http-adapter';
import { jsonBodyMiddleware, type JsonBodyOptions } from './json-body.middleware';
import { privateResponsesMiddleware } from './private-responses.middleware';
import { hostHeaderMiddleware } from './host-header.middleware';
import { urlTextMiddleware } from './url-text.middleware';

/**
 * The Express-specific part of the app: kept in this one file so that changing the HTTP adapter
 * is a local decision. Order matters: the request id and access log come before the body parser,
 * so a malformed or oversized body is still logged and answered with an id.
 */
export function configureHttp(
  app: NestExpressApplication,
  logger: Logger,
  settings: { trustProxy: boolean; logHashKey: string },
  observeResponse?: ResponseObserver,
  bodies: JsonBodyOptions = {},
): void {
  app.disable('x-powered-by');
  // No ETags from Express: the bodies are dynamic JSON, and hashing every body costs about 5% of
  // a small request's CPU. Static public reads set their own, computed once (static-json.ts).
  app.set('etag', false);
  // TRUST_PROXY trusts one hop, our load balancer: the client address is the last entry of
  // X-Forwarded-For, the one the balancer appended. With `true` Express would take the first,
  // which the client writes itself, and per-IP rate limits could be dodged by rotating it.
  app.set('trust proxy', settings.trustProxy ? 1 : false);
  app.use(createHttpLogger(logger, settings.logHashKey, observeResponse));
  observeRefusals(app.getHttpAdapter(), createRefusalLogger(logger, observeResponse));
  app.use(privateResponsesMiddleware);
  app.use(hostHeaderMiddleware);
  app.use(urlTextMiddleware);
  app.use(jsonBodyMiddleware(bodies));
}
