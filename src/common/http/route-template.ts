import type { IncomingMessage } from 'node:http';

/**
 * The Express route Nest mounts route-independent middleware on (nestjs-pino's). A request no
 * controller route matched still carries it as `request.route` when Nest answers 404.
 */
const MIDDLEWARE_CATCH_ALL = '/{*path}';

/**
 * The route template Express matched (`/v1/end-users/:user_id`), read once the response is done;
 * undefined for requests no controller route matched (unknown paths, bodies refused before
 * routing). Metrics and traces label requests with it, never with the raw path.
 */
export function routeTemplateOf(request: Pick<IncomingMessage, 'method'>): string | undefined {
  const route = (request as { route?: { path?: unknown } }).route?.path;
  return typeof route === 'string' && route !== MIDDLEWARE_CATCH_ALL ? route : undefined;
}
