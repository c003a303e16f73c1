import { useState } from 'preact/hooks';
import { AUDIT_ACTIONS } from '../../../src/audit/audit-actions';
import { api } from '../api';
import { formatTime, jsonText } from '../format';
import { useOrganization } from '../session';
import type { AuditEvent, Page } from '../types';
import {
  Empty,
  ErrorNotice,
  Loading,
  More,
  PageTitle,
  TableWrap,
  usePaged,
  SelectField,
} from '../ui';

/** The organization's audit log, newest first, filtered by action. */
export function AuditPage() {
  const organization = useOrganization();
  const [action, setAction] = useState('');
  const events = usePaged<AuditEvent>(
    (after) =>
      api<Page<AuditEvent>>('GET', '/v1/audit-events', {
        query: { limit: 50, starting_after: after, action: action || undefined },
      }),
    (event) => event.id,
    [organization.id, action],
  );
  return (
    <>
      <PageTitle title="Audit log">
        <form class="inline" onSubmit={(event) => event.preventDefault()}>
          <SelectField
            label="Action"
            value={action}
            onChange={(event) => setAction(event.currentTarget.value)}
          >
            <option value="">All actions</option>
            {AUDIT_ACTIONS.map((name) => (
              <option key={name} value={name}>
                {name}
              </option>
            ))}
          </SelectField>
        </form>
      </PageTitle>
      <ErrorNotice error={events.error} />
      {events.loading && events.items.length === 0 ? <Loading /> : null}
      {!events.loading && !events.error && events.items.length === 0 ? (
        <Empty>No events{action ? ` of ${action}` : ''}.</Empty>
      ) : null}
      {events.items.length > 0 ? (
        <TableWrap label="Audit events">
          <thead>
            <tr>
              <th scope="col">At</th>
              <th scope="col">Action</th>
              <th scope="col">Actor</th>
              <th scope="col">Target</th>
              <th scope="col">Details</th>
              <th scope="col">Request</th>
            </tr>
          </thead>
          <tbody data-testid="audit-events">
            {events.items.map((event) => (
              <tr key={event.id}>
                <td>{formatTime(event.created_at)}</td>
                <td>{event.action}</td>
                <td class="small">
                  {event.actor.type} <code>{event.actor.id.slice(0, 8)}</code>
                  {event.ip ? <div>{event.ip}</div> : null}
                </td>
                <td class="small wrap">
                  {event.target.type} <code>{event.target.id}</code>
                </td>
                <td>
                  <pre class="details">{jsonText(event.details)}</pre>
                </td>
                <td class="small">
                  <code>{event.request_id ?? '—'}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      ) : null}
      <More hasMore={events.hasMore} loading={events.loading} onMore={events.more} />
    </>
  );
}
