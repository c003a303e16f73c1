import { useState } from 'preact/hooks';
import { api } from '../api';
import { formatTime } from '../format';
import { canManage, useOrganization, useSession } from '../session';
import { type Invitation, type Member, type Page, ROLES, type Role } from '../types';
import {
  ConfirmDialog,
  Empty,
  ErrorNotice,
  Loading,
  More,
  Notice,
  PageTitle,
  TableWrap,
  useAction,
  usePaged,
  SelectField,
} from '../ui';

/** Members and their roles, and the invitations sent. */
export function TeamPage() {
  const session = useSession();
  const organization = useOrganization();
  const base = `/v1/organizations/${organization.id}`;
  const manage = canManage(organization);
  const members = usePaged<Member>(
    (after) =>
      api<Page<Member>>('GET', `${base}/members`, { query: { limit: 100, starting_after: after } }),
    (member) => member.user_id,
    [organization.id],
  );
  const [removing, setRemoving] = useState<Member | null>(null);
  // A role picked in a member's select, asked about before it is sent: an arrow key on a focused
  // select changes it, and a demotion revokes keys (found by review).
  const [changing, setChanging] = useState<{ member: Member; role: Role } | null>(null);
  const [keepKeys, setKeepKeys] = useState(false);
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);

  return (
    <>
      <PageTitle title="Team" />
      <section>
        <h2>Members</h2>
        {message ? <Notice>{message}</Notice> : null}
        <ErrorNotice error={members.error ?? action.error} />
        {members.loading && members.items.length === 0 ? <Loading /> : null}
        {members.items.length > 0 ? (
          <TableWrap label="Members">
            <thead>
              <tr>
                <th scope="col">Member</th>
                <th scope="col">Role</th>
                <th scope="col">Joined</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {members.items.map((member) => (
                <tr key={member.user_id}>
                  <td class="wrap">
                    {member.name ? <div>{member.name}</div> : null}
                    <div class="small">{member.email}</div>
                  </td>
                  <td>
                    {manage ? (
                      <select
                        aria-label={`Role of ${member.email}`}
                        value={
                          changing?.member.user_id === member.user_id ? changing.role : member.role
                        }
                        disabled={action.busy}
                        onChange={(event) => {
                          const role = event.currentTarget.value as Role;
                          if (role !== member.role) setChanging({ member, role });
                        }}
                      >
                        {ROLES.map((role) => (
                          <option key={role} value={role}>
                            {role}
                          </option>
                        ))}
                      </select>
                    ) : (
                      member.role
                    )}
                  </td>
                  <td>{formatTime(member.joined_at)}</td>
                  <td>
                    {manage || member.user_id === session.me.id ? (
                      <button
                        type="button"
                        class="danger small"
                        onClick={() => setRemoving(member)}
                      >
                        {member.user_id === session.me.id ? 'Leave' : 'Remove'}{' '}
                        <span class="visually-hidden">{member.email}</span>
                      </button>
                    ) : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
        ) : null}
        <More hasMore={members.hasMore} loading={members.loading} onMore={members.more} />
      </section>
      {manage ? (
        <Invitations base={base} />
      ) : (
        <p class="small">Owners and admins invite new members.</p>
      )}
      {changing ? (
        <ConfirmDialog
          title={`Make ${changing.member.email} ${changing.role}?`}
          confirm="Change role"
          onClose={() => setChanging(null)}
          onConfirm={async () => {
            await api('PATCH', `${base}/members/${changing.member.user_id}`, {
              body: { role: changing.role },
            });
            setMessage(`${changing.member.email} is now ${changing.role}.`);
            members.reload();
          }}
        >
          <p>
            {changing.member.email} is {changing.member.role} now.
            {changing.role === 'member'
              ? ' As a member they can no longer manage the organization: the invitations they sent and the API keys they made with the admin scope are revoked.'
              : changing.role === 'owner'
                ? ' As an owner they can do everything you can, remove you included.'
                : ''}
          </p>
        </ConfirmDialog>
      ) : null}
      {removing ? (
        <ConfirmDialog
          title={
            removing.user_id === session.me.id
              ? 'Leave this organization?'
              : `Remove ${removing.email}?`
          }
          confirm={removing.user_id === session.me.id ? 'Leave' : 'Remove'}
          onClose={() => {
            setRemoving(null);
            // Each removal starts from the default: a box ticked for one member and cancelled
            // kept the next one's keys (found by review).
            setKeepKeys(false);
          }}
          onConfirm={async () => {
            const self = removing.user_id === session.me.id;
            await api('DELETE', `${base}/members/${removing.user_id}`, {
              query: !self && keepKeys ? { keep_api_keys: 'true' } : {},
            });
            if (self) {
              await session.leaveOrganization(`You left ${organization.name}.`);
              return;
            }
            setMessage(`${removing.email} was removed.`);
            members.reload();
          }}
        >
          <p>They lose access at their next request.</p>
          {removing.user_id !== session.me.id ? (
            <label class="check">
              <input
                type="checkbox"
                checked={keepKeys}
                onChange={(e) => setKeepKeys(e.currentTarget.checked)}
              />
              Keep the API keys they made (by default they are revoked)
            </label>
          ) : null}
        </ConfirmDialog>
      ) : null}
    </>
  );
}

function Invitations({ base }: { base: string }) {
  const invitations = usePaged<Invitation>(
    (after) =>
      api<Page<Invitation>>('GET', `${base}/invitations`, {
        query: { limit: 100, starting_after: after },
      }),
    (invitation) => invitation.id,
    [base],
  );
  const [email, setEmail] = useState('');
  const [role, setRole] = useState<Role>('member');
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);
  return (
    <section>
      <h2>Invitations</h2>
      <form
        class="grid"
        onSubmit={(event) => {
          event.preventDefault();
          void action.run(async () => {
            await api('POST', `${base}/invitations`, { body: { email, role } });
            setMessage(`An invitation was mailed to ${email}.`);
            setEmail('');
            invitations.reload();
          });
        }}
      >
        <label>
          E-mail
          <input
            type="email"
            required
            maxLength={254}
            value={email}
            onInput={(e) => setEmail(e.currentTarget.value)}
          />
        </label>
        <SelectField
          label="Role"
          value={role}
          onChange={(e) => setRole(e.currentTarget.value as Role)}
        >
          {ROLES.map((r) => (
            <option key={r} value={r}>
              {r}
            </option>
          ))}
        </SelectField>
        <div class="actions">
          <button type="submit" disabled={action.busy}>
            Invite
          </button>
        </div>
      </form>
      {message ? <Notice>{message}</Notice> : null}
      <ErrorNotice error={action.error ?? invitations.error} />
      {invitations.loading && invitations.items.length === 0 ? <Loading /> : null}
      {!invitations.loading && !invitations.error && invitations.items.length === 0 ? (
        <Empty>No invitations.</Empty>
      ) : null}
      {invitations.items.length > 0 ? (
        <TableWrap label="Invitations">
          <thead>
            <tr>
              <th scope="col">E-mail</th>
              <th scope="col">Role</th>
              <th scope="col">Status</th>
              <th scope="col">Expires</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody>
            {invitations.items.map((invitation) => (
              <tr key={invitation.id}>
                <td class="wrap">{invitation.email}</td>
                <td>{invitation.role}</td>
                <td>
                  <span class={`badge ${invitation.status}`}>{invitation.status}</span>
                </td>
                <td>{formatTime(invitation.expires_at)}</td>
                <td>
                  {invitation.status === 'pending' ? (
                    <button
                      type="button"
                      class="danger small"
                      disabled={action.busy}
                      onClick={() =>
                        void action.run(async () => {
                          await api('DELETE', `${base}/invitations/${invitation.id}`);
                          setMessage(`The invitation to ${invitation.email} is revoked.`);
                          invitations.reload();
                        })
                      }
                    >
                      Revoke{' '}
                      <span class="visually-hidden">the invitation to {invitation.email}</span>
                    </button>
                  ) : null}
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      ) : null}
      <More hasMore={invitations.hasMore} loading={invitations.loading} onMore={invitations.more} />
    </section>
  );
}
