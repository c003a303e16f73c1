import { AppError } from '../common/errors/app-error';
import type { Role } from './entities/membership.entity';

/** The path's organization is not one the caller belongs to: answered like one that does not exist. */
export const organizationNotFound = () => AppError.notFound('Organization');

export function lastOwner(): AppError {
  return new AppError(
    'last_owner',
    'The organization must keep an owner: make another member owner first',
  );
}

/** Owners and admins manage members and invitations; members only see them. */
export function assertManager(role: Role): void {
  if (role === 'member') {
    throw new AppError('insufficient_role', 'Managing members needs the owner or admin role');
  }
}

/** Only an owner grants, removes or invites the owner role. */
export function assertOwner(role: Role): void {
  if (role !== 'owner') {
    throw new AppError('insufficient_role', 'Only an owner grants or removes the owner role');
  }
}
