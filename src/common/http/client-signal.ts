import { createParamDecorator, type ExecutionContext } from '@nestjs/common';
import type { ServerResponse } from 'node:http';
import { onResponseDone } from './response-done';

/**
 * A signal aborted when the client goes away before its response is complete (also when it left
 * before this call), so the work done for it (a model provider's call) stops at once.
 */
export function clientGoneSignal(response: ServerResponse): AbortSignal {
  const controller = new AbortController();
  onResponseDone(response, () => {
    if (!response.writableFinished) {
      controller.abort(new Error('the client closed the connection'));
    }
  });
  return controller.signal;
}

/** A handler's parameter: clientGoneSignal of the request's response. */
export const ClientGone = createParamDecorator(
  (_data: unknown, context: ExecutionContext): AbortSignal =>
    clientGoneSignal(context.switchToHttp().getResponse<ServerResponse>()),
);
