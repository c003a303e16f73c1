import { ExpressAdapter } from '@nestjs/platform-express';
import {
  createServer,
  maxHeaderSize,
  type RequestListener,
  type Server,
  type ServerResponse,
  STATUS_CODES,
} from 'node:http';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import { AppError } from '../errors/app-error';
import { toErrorResponse } from '../errors/all-exceptions.filter';
import { answeredOnSocket, type RefusedRequest } from '../logging/http-logger';
import { newRequestId, REQUEST_ID_HEADER } from './request-id';

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
  private readonly refusalObservers: Array<(refused: RefusedRequest) => void> = [];
  private readonly sockets = new Set<Socket>();

  constructor(private readonly timeouts: ServerTimeouts) {
    super();
  }

  /**
   * Answers 408 every request whose headers or body are still arriving, as REQUEST_TIMEOUT_MS
   * would: a shutdown's last step before its exit. Node stops checking its timeouts once the
   * server is closed, so one stalled upload held every shutdown to its forced exit (review).
   * Idle keep-alive connections are closed first (Node's own list of them: a byte count cannot
   * tell one from a connection whose next request is half sent, review of the change); what is
   * left without a response under way is a request whose headers are still arriving. A request
   * pipelined behind one being answered is not reached (its response is not the socket's yet).
   */
  timeOutUnfinishedRequests(): void {
    const server = this.getHttpServer() as Server;
    server.closeIdleConnections();
    for (const socket of this.sockets) {
      if (socket.destroyed) continue;
      const response = (socket as Socket & { _httpMessage?: ServerResponse })._httpMessage;
      if (response && (response.headersSent || response.req.complete)) continue;
      // Closed once answered: a client still sending would otherwise complete the request, and
      // its handler would run after the 408 (review of the change).
      socket.once('finish', () => socket.destroy());
      const timedOut = Object.assign(new Error('the shutdown ends the request'), {
        code: 'ERR_HTTP_REQUEST_TIMEOUT',
      });
      server.emit('clientError', timedOut, socket);
    }
  }

  /** Told of each request Node's parser refused, once it is answered (the access line). */
  onRefusal(observer: (refused: RefusedRequest) => void): void {
    this.refusalObservers.push(observer);
  }

  // Graceful shutdown lets in-flight requests finish, so `forceCloseConnections` is not offered.
  override initHttpServer(): void {
    const server = createServer(
      {
        requestTimeout: this.timeouts.requestTimeoutMs,
        headersTimeout: this.timeouts.headersTimeoutMs,
        keepAliveTimeout: this.timeouts.keepAliveTimeoutMs,
        connectionsCheckingInterval: Math.min(1000, this.timeouts.headersTimeoutMs),
        // Node answered a request without Host with a bare 400 (no envelope, no id, no access
        // line): hostHeaderMiddleware refuses it instead (found by review).
        requireHostHeader: false,
      },
      this.getInstance<RequestListener>(),
    );
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket);
      socket.once('close', () => this.sockets.delete(socket));
    });
    server.on(
      'clientError',
      (error: Error & { code?: string }, socket: Duplex & { bytesRead?: number }) => {
        const refused = answerClientError(error, socket);
        if (refused) for (const observe of this.refusalObservers) observe(refused);
      },
    );
    // CONNECT (a proxy's tunnel) never reaches Express: without a listener Node closed the
    // socket without a word (found by review). The socket is ours then, without Node's error
    // listener or timeouts: an error would end the process (a client's reset did: review of the
    // change), and a client that never closes its side would hold it open.
    server.on('connect', (_request, socket: Duplex) => {
      socket.on('error', () => socket.destroy());
      socket.once('finish', () => socket.destroy());
      const refused = answerOnSocket(
        socket,
        new AppError('method_not_allowed', 'CONNECT is not served here'),
        newRequestId(),
      );
      for (const observe of this.refusalObservers) observe({ ...refused, method: 'CONNECT' });
    });
    this.setHttpServer(server);
  }
}

/** What Node's parser refuses before a request reaches Express, as the contract's envelope. */
const CLIENT_ERRORS: Record<string, () => AppError> = {
  ERR_HTTP_REQUEST_TIMEOUT: () =>
    new AppError('request_timeout', 'The request did not arrive within the time allowed'),
  HPE_HEADER_OVERFLOW: () =>
    new AppError(
      'headers_too_large',
      `The request line and headers exceed ${maxHeaderSize / 1024} KiB`,
    ),
  HPE_CHUNK_EXTENSIONS_OVERFLOW: () =>
    new AppError('payload_too_large', 'The chunk extensions exceed the allowed size'),
};

/**
 * Replaces Node's default `clientError` answer (a bare status line) with the error envelope, so
 * every answer the service gives is one a client can parse and quote. A request already in
 * Express's hands (its body never arrived) keeps its request id, and its own access line tells
 * the answer (answeredOnSocket); a request the parser never finished gets a fresh id and is
 * answered here (the RefusedRequest returned). A connection only closed is neither: the client
 * gone, a response already under way, or a connection that sent nothing before the timeout (a
 * browser's or a pool's preconnect, closed quietly as nginx does).
 */
function answerClientError(
  error: Error & { code?: string },
  socket: Duplex & { bytesRead?: number },
): RefusedRequest | undefined {
  const response = (socket as Duplex & { _httpMessage?: ServerResponse })._httpMessage;
  if (
    error.code === 'ECONNRESET' ||
    !socket.writable ||
    response?.headersSent ||
    socket.bytesRead === 0
  ) {
    socket.destroy();
    return undefined;
  }
  const ownId = response?.getHeader(REQUEST_ID_HEADER);
  const requestId = typeof ownId === 'string' ? ownId : newRequestId();
  const refusal =
    CLIENT_ERRORS[error.code ?? '']?.() ??
    new AppError('validation_failed', 'The request is not valid HTTP/1.1');
  const refused = answerOnSocket(socket, refusal, requestId);
  if (response) {
    answeredOnSocket(response, { status: refused.status, code: refused.code });
    return undefined;
  }
  return refused;
}

/** Writes `refusal`'s envelope on the socket itself, and closes it. */
function answerOnSocket(socket: Duplex, refusal: AppError, requestId: string): RefusedRequest {
  const { status, body } = toErrorResponse(refusal, requestId);
  const json = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\n` +
      `Content-Type: application/json; charset=utf-8\r\n` +
      `Content-Length: ${Buffer.byteLength(json)}\r\n` +
      `${REQUEST_ID_HEADER}: ${requestId}\r\n` +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      'Connection: close\r\n\r\n' +
      json,
  );
  return { requestId, status, code: refusal.code };
}

export function createHttpAdapter(timeouts: ServerTimeouts): ExpressAdapter {
  return new TimedExpressAdapter(timeouts);
}

/** TimedExpressAdapter.timeOutUnfinishedRequests, on a server createHttpAdapter made. */
export function timeOutUnfinishedRequests(adapter: unknown): void {
  if (adapter instanceof TimedExpressAdapter) adapter.timeOutUnfinishedRequests();
}

/** Tells `observer` of each request the parser refused, on a server createHttpAdapter made. */
export function observeRefusals(
  adapter: unknown,
  observer: (refused: RefusedRequest) => void,
): void {
  if (adapter instanceof TimedExpressAdapter) adapter.onRefusal(observer);
}
