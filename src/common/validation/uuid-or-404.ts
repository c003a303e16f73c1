import { ParseUUIDPipe } from '@nestjs/common';
import { AppError } from '../errors/app-error';

/**
 * A pipe for a path id: anything but a UUID names nothing, so it answers 404 like an id that does
 * not exist (not 400), and never reaches the database.
 */
export const uuidOr404 = (what: string) =>
  new ParseUUIDPipe({ exceptionFactory: () => AppError.notFound(what) });
