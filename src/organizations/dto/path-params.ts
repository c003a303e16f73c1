import { ParseUUIDPipe } from '@nestjs/common';
import { AppError } from '../../common/errors/app-error';

/**
 * The path ids of organizations, members and invitations: anything but a UUID names nothing, so
 * it answers 404 like an id that does not exist (not 400), and never reaches the database.
 */
const uuidOr404 = (what: string) =>
  new ParseUUIDPipe({ exceptionFactory: () => AppError.notFound(what) });

export const organizationIdPipe = uuidOr404('Organization');
export const memberIdPipe = uuidOr404('Member');
export const invitationIdPipe = uuidOr404('Invitation');
