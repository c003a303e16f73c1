import { useState } from 'preact/hooks';
import { api } from '../api';
import { formatTime } from '../format';
import { navigate } from '../router';
import { useSession } from '../session';
import type { Organization } from '../types';
import { Empty, ErrorNotice, Notice, PageTitle, TableWrap, useAction } from '../ui';

/** The organizations the user belongs to: pick the one to act in, or make one. */
export function OrganizationsPage() {
  const session = useSession();
  const [name, setName] = useState('');
  const action = useAction();
  const choose = (organization: Organization) => {
    session.selectOrganization(organization.id);
    navigate('/usage');
  };
  return (
    <>
      <PageTitle title="Organizations" />
      {session.notice ? <Notice>{session.notice}</Notice> : null}
      <p>Pick the organization to work in. What you may do there is what your role allows.</p>
      {session.organizations.length === 0 ? (
        <Empty>You belong to no organization yet: create one, or accept an invitation.</Empty>
      ) : (
        <TableWrap label="Your organizations">
          <thead>
            <tr>
              <th scope="col">Name</th>
              <th scope="col">Your role</th>
              <th scope="col">Created</th>
              <th scope="col">
                <span class="visually-hidden">Action</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {session.organizations.map((organization) => (
              <tr key={organization.id}>
                <td>{organization.name}</td>
                <td>{organization.role}</td>
                <td>{formatTime(organization.created_at)}</td>
                <td>
                  {session.organization?.id === organization.id ? (
                    <span class="badge">Current</span>
                  ) : (
                    <button type="button" onClick={() => choose(organization)}>
                      Open <span class="visually-hidden">{organization.name}</span>
                    </button>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      )}
      <section>
        <h2>New organization</h2>
        <form
          class="inline"
          onSubmit={(event) => {
            event.preventDefault();
            void action.run(async () => {
              const created = await api<Organization>('POST', '/v1/organizations', {
                asUser: true,
                body: { name },
              });
              await session.refreshOrganizations();
              setName('');
              choose(created);
            });
          }}
        >
          <label>
            Name
            <input
              required
              maxLength={200}
              value={name}
              onInput={(e) => setName(e.currentTarget.value)}
            />
          </label>
          <button type="submit" disabled={action.busy}>
            Create
          </button>
        </form>
        <ErrorNotice error={action.error} />
      </section>
    </>
  );
}
