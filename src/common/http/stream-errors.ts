import type { StreamableFile } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { toErrorResponse } from '../errors/all-exceptions.filter';
import { requestIdOf } from './request-id';

/**
 * A streamed document whose source fails: before its first byte, the client gets the error
 * envelope (500, with the request id, the failure on the access log line) instead of Nest's
 * plain-text 400; after it, the connection is cut, so a truncated document cannot pass as whole.
 */
export function withEnvelopeOnFailure(file: StreamableFile): StreamableFile {
  return file.setErrorHandler((error, handlerResponse) => {
    // Under Express, Nest hands the handler the ServerResponse it was piping to.
    const response = handlerResponse as unknown as ServerResponse & { err?: Error };
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const { status, body } = toErrorResponse(error, requestIdOf(response.req));
    response.err = error;
    response.removeHeader('Content-Disposition');
    response.statusCode = status;
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.end(JSON.stringify(body));
  });
}
