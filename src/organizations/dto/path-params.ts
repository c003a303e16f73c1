import { uuidOr404 } from '../../common/validation/uuid-or-404';

export const organizationIdPipe = uuidOr404('Organization');
export const memberIdPipe = uuidOr404('Member');
export const invitationIdPipe = uuidOr404('Invitation');
