import type { StreamableFile } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { isUnexpected, toErrorResponse } from '../errors/all-exceptions.filter';
import { requestIdOf } from './request-id';

/**
 * A streamed document whose source fails: before its first byte, the client gets the error
 * envelope (its status, with the request id) instead of Nest's plain-text 400; after it, the
 * connection is cut, so a truncated document cannot pass as whole. Either way an unexpected
 * failure goes on the access line with its stack, as the exception filter puts it; a refusal
 * (the end user erased while the document was read: 404) does not (it was logged as an error,
 * with a stack).
 */
export function withEnvelopeOnFailure(file: StreamableFile): StreamableFile {
  return file.setErrorHandler((error, handlerResponse) => {
    // Under Express, Nest hands the handler the ServerResponse it was piping to.
    const response = handlerResponse as unknown as ServerResponse & { err?: Error };
    const { status, body } = toErrorResponse(error, requestIdOf(response.req));
    if (isUnexpected(error, status)) response.err = error;
    if (response.headersSent) {
      response.destroy();
      return;
    }
    response.removeHeader('Content-Disposition');
    response.statusCode = status;
    response.setHeader('Content-Type', 'application/json; charset=utf-8');
    response.end(JSON.stringify(body));
  });
}
