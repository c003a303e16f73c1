import type { ExecutionContext } from '@nestjs/common';

/**
 * An HTTP ExecutionContext whose request carries a caller of `organizationId`, as the
 * authentication guard leaves it, its body not yet arrived: for an interceptor called without a route.
 */
export function asCaller(organizationId: string): ExecutionContext {
  const request = {
    caller: { organizationId },
    headers: {},
    socket: { bytesRead: 0 },
    complete: false,
  };
  return { switchToHttp: () => ({ getRequest: () => request }) } as unknown as ExecutionContext;
}
