import type { NextFunction, Request, Response } from 'express';
import { AppError } from '../errors/app-error';
import { isStorableText } from '../validation/untrusted-json';

/**
 * Refuses a path or query string whose percent-encoding is malformed or decodes to U+0000 or an
 * unpaired surrogate (API contract §14), before any route, guard or query sees it. Raw bytes
 * cannot carry either (Node's parser refuses control characters and reads the rest as Latin-1),
 * so only URLs with a `%` are decoded.
 */
export function urlTextMiddleware(request: Request, _response: Response, next: NextFunction): void {
  const url = request.url;
  if (!url.includes('%')) return next();
  let decoded: string;
  try {
    decoded = decodeURIComponent(url);
  } catch {
    return next(
      AppError.validation([{ field: 'url', problem: 'is not valid percent-encoded UTF-8' }]),
    );
  }
  if (!isStorableText(decoded)) {
    return next(
      AppError.validation([
        { field: 'url', problem: 'must not contain U+0000 or unpaired surrogates' },
      ]),
    );
  }
  next();
}
