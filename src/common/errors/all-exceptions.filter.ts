import {
  ArgumentsHost,
  Catch,
  ExceptionFilter,
  HttpException,
  HttpStatus,
  Inject,
  Optional,
} from '@nestjs/common';
import { HttpAdapterHost } from '@nestjs/core';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { newRequestId, REQUEST_ID_HEADER, requestIdOf } from '../http/request-id';
import { AppError } from './app-error';
import { CODE_OF_STATUS } from './error-codes';
import { BEFORE_ERROR_REPLY, type BeforeErrorReply } from './before-error-reply';
import { isDatabaseUnavailable } from './database-unavailable';
import { isStatementTimeout } from './statement-timeout';

export interface ErrorResponse {
  status: number;
  body: { error: Record<string, unknown> };
  headers?: Record<string, string>;
}

/**
 * Writes the error envelope of the API contract (§4) for everything thrown anywhere in a request.
 * Unexpected errors become 500 `internal_error`; their details go to the request's log line
 * (with the request id), never to the response.
 */
@Catch()
export class AllExceptionsFilter implements ExceptionFilter {
  constructor(
    private readonly adapterHost: HttpAdapterHost,
    @Optional() @Inject(BEFORE_ERROR_REPLY) private readonly beforeReply?: BeforeErrorReply,
  ) {}

  catch(exception: unknown, host: ArgumentsHost): void {
    const http = host.switchToHttp();
    const request = http.getRequest<IncomingMessage>();
    const response = http.getResponse<ServerResponse & { err?: Error }>();
    if (!this.beforeReply) return this.reply(exception, request, response);
    void this.beforeReply(request, response)
      .catch(() => null)
      .then((replacement) => this.reply(replacement ?? exception, request, response))
      .catch(() => response.destroy());
  }

  private reply(
    exception: unknown,
    request: IncomingMessage,
    response: ServerResponse & { err?: Error },
  ): void {
    let requestId = requestIdOf(request);
    if (!requestId) {
      requestId = newRequestId();
      if (!response.headersSent) response.setHeader(REQUEST_ID_HEADER, requestId);
    }

    const { status, body, headers } = toErrorResponse(exception, requestId);
    if (isUnexpected(exception, status)) {
      // The HTTP logger puts `res.err` on the request's single log line.
      response.err = exception as Error;
    }
    if (response.headersSent) {
      response.destroy();
      return;
    }
    for (const [name, value] of Object.entries(headers ?? {})) response.setHeader(name, value);
    this.adapterHost.httpAdapter.reply(response, body, status);
  }
}

/**
 * Whether an error is a failure of the service, whose error and stack the access line carries
 * (at error level): a refusal the service meant (an AppError, 4xx) is not.
 */
export function isUnexpected(exception: unknown, status: number): boolean {
  return status >= 500 && !(exception instanceof AppError);
}

/**
 * The status, envelope and headers of an error answer: the HTTP reply here, and the `error`
 * event of a stream that fails after it started.
 */
export function toErrorResponse(exception: unknown, requestId: string): ErrorResponse {
  if (exception instanceof AppError) {
    return {
      status: exception.status,
      headers: exception.headers,
      body: {
        error: {
          status: exception.status,
          code: exception.code,
          message: exception.message,
          request_id: requestId,
          ...(exception.details ? { details: exception.details } : {}),
          ...(exception.detailsObject ? { details: exception.detailsObject } : {}),
          ...(exception.extra ?? {}),
        },
      },
    };
  }
  if (exception instanceof HttpException) {
    const status = exception.getStatus();
    return {
      status,
      body: {
        error: {
          status,
          code: CODE_OF_STATUS[status] ?? (status >= 500 ? 'internal_error' : 'http_error'),
          message: status >= 500 ? 'Internal server error' : publicMessage(exception),
          request_id: requestId,
        },
      },
    };
  }
  if (isStatementTimeout(exception)) {
    // DATABASE_STATEMENT_TIMEOUT_MS (contract §29): the database was too slow for this request,
    // which may well succeed again in a moment.
    return toErrorResponse(
      new AppError('database_timeout', 'The database took too long to answer; try again', {
        headers: { 'Retry-After': '1' },
      }),
      requestId,
    );
  }
  if (isDatabaseUnavailable(exception)) {
    return toErrorResponse(
      new AppError('service_unavailable', 'The database is unavailable; try again', {
        headers: { 'Retry-After': '1' },
      }),
      requestId,
    );
  }
  return {
    status: HttpStatus.INTERNAL_SERVER_ERROR,
    body: {
      error: {
        status: 500,
        code: 'internal_error',
        message: 'Internal server error',
        request_id: requestId,
      },
    },
  };
}

/** The longest path an unknown route's message repeats. */
const ECHOED_PATH_CHARS = 200;

/**
 * Nest's own exceptions carry safe messages; anything else is summarised. An unknown route's
 * ("Cannot GET /x?y") repeats the path without its query (where a misplaced credential would
 * be) and at most ECHOED_PATH_CHARS of it.
 */
function publicMessage(exception: HttpException): string {
  const response = exception.getResponse();
  if (typeof response === 'string') return response;
  const message = (response as { message?: unknown }).message;
  if (typeof message === 'string') return withoutQuery(message);
  if (Array.isArray(message)) return message.map(String).join('; ');
  return exception.message;
}

function withoutQuery(message: string): string {
  const route = /^Cannot (\S+) ([^?]*)/.exec(message);
  if (!route) return message;
  const path = route[2];
  const shown = path.length > ECHOED_PATH_CHARS ? `${path.slice(0, ECHOED_PATH_CHARS)}…` : path;
  return `Cannot ${route[1]} ${shown}`;
}
