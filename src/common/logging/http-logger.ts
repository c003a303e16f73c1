import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { newRequestId, REQUEST_ID_HEADER } from '../http/request-id';

function pathOf(request: IncomingMessage): string {
  const url =
    (request as IncomingMessage & { originalUrl?: string }).originalUrl ?? request.url ?? '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

/**
 * The first middleware of every request: gives it a new ULID (an incoming X-Request-Id is never
 * trusted), sends it back as X-Request-Id, and writes one JSON line when the response ends with
 * requestId, method, path, status and duration. Headers and bodies are not logged at all.
 */
export function createHttpLogger(logger: Logger) {
  return pinoHttp({
    logger,
    genReqId: (_request: IncomingMessage, response: ServerResponse) => {
      const id = newRequestId();
      response.setHeader(REQUEST_ID_HEADER, id);
      return id;
    },
    customAttributeKeys: { reqId: 'requestId', responseTime: 'duration_ms' },
    quietReqLogger: true,
    quietResLogger: true,
    wrapSerializers: false,
    serializers: {
      req: () => undefined,
      res: () => undefined,
    },
    customLogLevel: (_request, response, error) =>
      error || response.statusCode >= 500 ? 'error' : response.statusCode >= 400 ? 'warn' : 'info',
    customSuccessMessage: () => 'request completed',
    customErrorMessage: () => 'request failed',
    customSuccessObject: (request, response, value: Record<string, unknown>) => ({
      requestId: value.requestId,
      method: request.method,
      path: pathOf(request),
      status: response.statusCode,
      duration_ms: value.duration_ms,
    }),
    customErrorObject: (request, response, error, value: Record<string, unknown>) => ({
      requestId: value.requestId,
      method: request.method,
      path: pathOf(request),
      status: response.statusCode,
      duration_ms: value.duration_ms,
      err: error,
    }),
  });
}
