import { createContext } from 'preact';
import { useContext } from 'preact/hooks';
import type { Me, Organization } from './types';

export interface Session {
  me: Me;
  organizations: Organization[];
  /** The organization the console acts in (X-Organization-Id); null until one is picked. */
  organization: Organization | null;
  /** Why the console went back to the organizations page, if it did. */
  notice: string | null;
  selectOrganization(id: string): void;
  refreshOrganizations(): Promise<Organization[]>;
  /** Out of the current organization (left, or removed): back to the picker, saying `message`. */
  leaveOrganization(message: string): Promise<void>;
  signOut(message?: string): void;
  /** Signs out on the user's request: the access token ends on the service too, then here. */
  endSession(): Promise<void>;
}

export const SessionContext = createContext<Session | null>(null);

/** The signed-in session (pages under the layout always have one). */
export function useSession(): Session {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in page');
  return session;
}

/** The current organization of a page that needs one. */
export function useOrganization(): Organization {
  const organization = useSession().organization;
  if (!organization) throw new Error('useOrganization before an organization was picked');
  return organization;
}

/** Whether the user's role may manage the organization (owners and admins: the API's `admin`). */
export const canManage = (organization: Organization) => organization.role !== 'member';
