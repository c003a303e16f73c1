import 'uplot/dist/uPlot.min.css';
import './styles.css';
import { render } from 'preact';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import {
  all,
  api,
  ApiError,
  clearCredentials,
  currentOrganization,
  setCredentials,
  setOrganization,
  tokenExpiresAt,
  whenOrganizationLost,
  whenSignedOut,
} from './api';
import { AcceptInvitationPage } from './pages/accept-invitation';
import { ApiKeysPage } from './pages/api-keys';
import { AuditPage } from './pages/audit';
import { EndUsersPage } from './pages/end-users';
import { OrganizationsPage } from './pages/organizations';
import { ResetPasswordPage, SignInPage, VerifyEmailPage } from './pages/sign-in';
import { SafetyPage } from './pages/safety';
import { TeamPage } from './pages/team';
import { UsagePage } from './pages/usage';
import { WebhooksPage } from './pages/webhooks';
import { navigate, useRoute } from './router';
import { type Session, SessionContext, useSession } from './session';
import type { Login, Me, Organization } from './types';
import { Link, Loading } from './ui';

interface Signed {
  me: Me;
  organizations: Organization[];
  organizationId: string | null;
  /** Said on the organizations page: why the console went back there. */
  notice: string | null;
}

/** Every organization the user belongs to (without X-Organization-Id: a user-level call). */
const myOrganizations = () => all<Organization>('/v1/organizations', {}, 10, { asUser: true });

const PAGES: Array<{ path: string; title: string; render: () => preact.JSX.Element }> = [
  { path: '/usage', title: 'Usage', render: () => <UsagePage /> },
  { path: '/api-keys', title: 'API keys', render: () => <ApiKeysPage /> },
  { path: '/webhooks', title: 'Webhooks', render: () => <WebhooksPage /> },
  { path: '/team', title: 'Team', render: () => <TeamPage /> },
  { path: '/safety', title: 'Safety and spend', render: () => <SafetyPage /> },
  { path: '/end-users', title: 'End users', render: () => <EndUsersPage /> },
  { path: '/audit', title: 'Audit log', render: () => <AuditPage /> },
];

function App() {
  const route = useRoute();
  const [signed, setSigned] = useState<Signed | null>(null);
  const [notice, setNotice] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);

  /**
   * Reads of the organizations list begun (a sign-in or sign-out counts as one): only the latest
   * read's answer is shown, since an earlier one answering late may still list an organization
   * left since, or miss one made since (review).
   */
  const listReads = useRef(0);
  const showIfLatest = (read: number, organizations: Organization[]) => {
    if (read === listReads.current)
      setSigned((previous) => previous && { ...previous, organizations });
  };

  const signOut = (message?: string) => {
    listReads.current++;
    clearCredentials();
    setSigned(null);
    setNotice(message ?? null);
  };

  useEffect(() => whenSignedOut((reason) => signOut(reason)), []);

  /**
   * The user's Sign out: the access token ends on the service first (POST /v1/auth/logout), so a
   * copy of it (a proxy's log, a shared machine's memory) is refused from then on (found by
   * review: it still worked for the rest of its hour); then here, whatever the answer.
   */
  const endSession = async () => {
    try {
      await api('POST', '/v1/auth/logout', { asUser: true });
      signOut();
    } catch (error) {
      // A 401: the token had ended already. Anything else (unreachable, 429, 5xx) left it
      // working on the service, which the user is told (found by review).
      const ended = error instanceof ApiError && error.status === 401;
      signOut(
        ended
          ? undefined
          : 'Signed out of this console, but the service did not end the session: it ends when it expires.',
      );
    }
  };

  /**
   * Back to the picker, out of an organization the user no longer belongs to: it is taken off
   * the list at once (the picker never offers it while the list is read again), and the list is
   * read again for any other change (said when it cannot be).
   */
  const leaveOrganization = async (message: string) => {
    const read = ++listReads.current;
    setOrganization(null);
    setSigned(
      (previous) =>
        previous && {
          ...previous,
          organizations: previous.organizations.filter((o) => o.id !== previous.organizationId),
          organizationId: null,
          notice: message,
        },
    );
    navigate('/organizations', { replace: true });
    try {
      showIfLatest(read, await myOrganizations());
    } catch (error) {
      if (read !== listReads.current) return;
      const why = error instanceof Error ? error.message : String(error);
      setSigned(
        (previous) =>
          previous && {
            ...previous,
            notice: `${message} Your organizations could not be read again (${why}); sign in again to see them.`,
          },
      );
    }
  };

  // Only for the organization still current: a late answer from one left already, after another
  // was picked, changes nothing (and several refusals of one organization leave it once).
  useEffect(
    () =>
      whenOrganizationLost((lost) => {
        if (lost !== currentOrganization()) return;
        void leaveOrganization('You are no longer a member of that organization.');
      }),
    [],
  );

  // The token's own end: sign out then, rather than at the next refused call.
  useEffect(() => {
    const expiresAt = tokenExpiresAt();
    if (!signed || expiresAt === null) return;
    const timer = setTimeout(
      () => signOut('Your session has expired. Sign in again.'),
      Math.max(0, expiresAt - Date.now()),
    );
    return () => clearTimeout(timer);
  }, [signed]);

  const signIn = async (login: Login) => {
    listReads.current++;
    setStarting(true);
    try {
      setCredentials(login.access_token, login.expires_in);
      const [me, organizations] = await Promise.all([
        api<Me>('GET', '/v1/me', { asUser: true }),
        myOrganizations(),
      ]);
      const only = organizations.length === 1 ? organizations[0].id : null;
      setOrganization(only);
      setNotice(null);
      setSigned({ me, organizations, organizationId: only, notice: null });
      if (route.path === '/' || route.path === '/sign-in') {
        navigate(only ? '/usage' : '/organizations', { replace: true });
      }
    } catch (error) {
      clearCredentials();
      throw error;
    } finally {
      setStarting(false);
    }
  };

  const session = useMemo<Session | null>(() => {
    if (!signed) return null;
    const organization = signed.organizations.find((o) => o.id === signed.organizationId) ?? null;
    return {
      me: signed.me,
      organizations: signed.organizations,
      organization,
      notice: signed.notice,
      selectOrganization: (id: string) => {
        setOrganization(id);
        setSigned((previous) => previous && { ...previous, organizationId: id, notice: null });
      },
      refreshOrganizations: async () => {
        const read = ++listReads.current;
        const organizations = await myOrganizations();
        showIfLatest(read, organizations);
        return organizations;
      },
      leaveOrganization,
      signOut,
      endSession,
    };
  }, [signed]);

  if (route.path === '/reset-password') return <ResetPasswordPage />;
  if (route.path === '/verify-email') return <VerifyEmailPage />;
  if (starting)
    return (
      <main class="center">
        <Loading what="Signing in" />
      </main>
    );
  if (!session) {
    return (
      <SignInPage
        notice={notice}
        invitation={route.path === '/accept-invitation'}
        onSignedIn={signIn}
      />
    );
  }
  return (
    <SessionContext.Provider value={session}>
      <Shell path={route.path} />
    </SessionContext.Provider>
  );
}

function Shell({ path }: { path: string }) {
  const session = useSession();
  const organization = session.organization;
  let content: preact.JSX.Element;
  if (path === '/accept-invitation') content = <AcceptInvitationPage />;
  else if (path === '/organizations' || !organization) content = <OrganizationsPage />;
  else content = (PAGES.find((page) => page.path === path) ?? PAGES[0]).render();
  return (
    <>
      <a class="skip" href="#main">
        Skip to the page
      </a>
      <header class="top">
        <span class="brand">Personality API</span>
        {organization ? (
          <Link to="/organizations" class="org">
            <span class="visually-hidden">Organization: </span>
            {organization.name}
            <span class="role"> ({organization.role})</span>
          </Link>
        ) : null}
        <span class="who">{session.me.email}</span>
        <button type="button" class="secondary small" onClick={() => void session.endSession()}>
          Sign out
        </button>
      </header>
      {organization ? (
        <nav aria-label="Console">
          <ul>
            {PAGES.map((page) => (
              <li key={page.path}>
                <Link
                  to={page.path}
                  current={page.path === path || (path === '/' && page.path === '/usage')}
                >
                  {page.title}
                </Link>
              </li>
            ))}
          </ul>
        </nav>
      ) : null}
      <main id="main" tabIndex={-1}>
        {content}
      </main>
    </>
  );
}

const root = document.getElementById('app')!;
// The page's "Loading the console…" goes: render() adds to a container, it does not replace it.
root.replaceChildren();
render(<App />, root);
