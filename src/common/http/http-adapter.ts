import { ExpressAdapter } from '@nestjs/platform-express';
import { createServer, type RequestListener } from 'node:http';

export interface ServerTimeouts {
  requestTimeoutMs: number;
  headersTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

/**
 * Nest's Express adapter with the server's timeouts set where the server is created: Node checks
 * them every `connectionsCheckingInterval` (30 s unless given at creation), so a 30 s request
 * timeout could otherwise hold a slow client for up to a minute.
 */
class TimedExpressAdapter extends ExpressAdapter {
  constructor(private readonly timeouts: ServerTimeouts) {
    super();
  }

  // Graceful shutdown lets in-flight requests finish, so `forceCloseConnections` is not offered.
  override initHttpServer(): void {
    const server = createServer(
      {
        requestTimeout: this.timeouts.requestTimeoutMs,
        headersTimeout: this.timeouts.headersTimeoutMs,
        keepAliveTimeout: this.timeouts.keepAliveTimeoutMs,
        connectionsCheckingInterval: Math.min(1000, this.timeouts.headersTimeoutMs),
      },
      this.getInstance<RequestListener>(),
    );
    this.setHttpServer(server);
  }
}

export function createHttpAdapter(timeouts: ServerTimeouts): ExpressAdapter {
  return new TimedExpressAdapter(timeouts);
}
