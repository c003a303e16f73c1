import { useEffect, useState } from 'preact/hooks';
import { api } from '../api';
import { currentRoute, navigate } from '../router';
import { useSession } from '../session';
import type { Organization } from '../types';
import { ErrorNotice, PageTitle, useAction } from '../ui';

/** The token of the invitation link, read once and taken out of the address. */
const pending = {
  token: currentRoute().path === '/accept-invitation' ? currentRoute().query.get('token') : null,
};
if (pending.token) history.replaceState(null, '', location.pathname);

/** The page of the invitation link (APP_PUBLIC_URL/console/accept-invitation?token=…), signed in. */
export function AcceptInvitationPage() {
  const session = useSession();
  const [token] = useState(pending.token);
  const action = useAction();
  useEffect(() => {
    pending.token = null;
  }, []);
  return (
    <>
      <PageTitle title="Join an organization" />
      {!token ? (
        <ErrorNotice error="This page needs the link from the invitation mail." />
      ) : (
        <>
          <p>
            Accept the invitation as <strong>{session.me.email}</strong>? It must be the address the
            invitation was sent to.
          </p>
          <ErrorNotice error={action.error} />
          <button
            type="button"
            disabled={action.busy}
            onClick={() =>
              void action.run(async () => {
                const joined = await api<Organization>('POST', '/v1/invitations/accept', {
                  asUser: true,
                  body: { token },
                });
                await session.refreshOrganizations();
                session.selectOrganization(joined.id);
                navigate('/usage');
              })
            }
          >
            Accept the invitation
          </button>
        </>
      )}
    </>
  );
}
