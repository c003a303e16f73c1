import { useState } from 'preact/hooks';
import { WEBHOOK_EVENT_TYPES } from '../../../src/webhooks/webhook-event-types';
import { api } from '../api';
import { formatNumber, formatTime } from '../format';
import { useOrganization } from '../session';
import type { Page, WebhookDelivery, WebhookEndpoint } from '../types';
import {
  ConfirmDialog,
  Empty,
  ErrorNotice,
  Loading,
  More,
  Notice,
  PageTitle,
  SecretOnce,
  TableWrap,
  useAction,
  usePaged,
} from '../ui';

/** Webhook endpoints (create, enable, disable, delete) and each one's deliveries, redelivered on demand. */
export function WebhooksPage() {
  const organization = useOrganization();
  const endpoints = usePaged<WebhookEndpoint>(
    (after) =>
      api<Page<WebhookEndpoint>>('GET', '/v1/webhook-endpoints', {
        query: { limit: 100, starting_after: after },
      }),
    (endpoint) => endpoint.id,
    [organization.id],
  );
  const [secret, setSecret] = useState<string | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [deleting, setDeleting] = useState<WebhookEndpoint | null>(null);
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);

  const setStatus = (endpoint: WebhookEndpoint, status: 'enabled' | 'disabled') =>
    action.run(async () => {
      await api('PATCH', `/v1/webhook-endpoints/${endpoint.id}`, { body: { status } });
      setMessage(`${endpoint.url} is ${status}.`);
      endpoints.reload();
    });

  const current = endpoints.items.find((endpoint) => endpoint.id === selected) ?? null;
  return (
    <>
      <PageTitle title="Webhooks" />
      <p>
        Endpoints receive the organization's events, signed with their secret (Standard Webhooks).
      </p>
      {secret ? (
        <SecretOnce
          label="The endpoint's signing secret"
          secret={secret}
          onDone={() => setSecret(null)}
        />
      ) : null}
      <CreateEndpoint
        onCreated={(endpoint) => {
          if (endpoint.secret) setSecret(endpoint.secret);
          endpoints.reload();
        }}
      />
      <section>
        <h2>Endpoints</h2>
        {message ? <Notice>{message}</Notice> : null}
        <ErrorNotice error={endpoints.error ?? action.error} />
        {endpoints.loading && endpoints.items.length === 0 ? <Loading /> : null}
        {!endpoints.loading && !endpoints.error && endpoints.items.length === 0 ? (
          <Empty>No endpoints yet.</Empty>
        ) : null}
        {endpoints.items.length > 0 ? (
          <TableWrap label="Webhook endpoints">
            <thead>
              <tr>
                <th scope="col">URL</th>
                <th scope="col">Events</th>
                <th scope="col">Status</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody data-testid="endpoints">
              {endpoints.items.map((endpoint) => (
                <tr key={endpoint.id} class={endpoint.id === selected ? 'selected' : undefined}>
                  <td class="wrap">
                    <code>{endpoint.url}</code>
                    {endpoint.description ? <div class="small">{endpoint.description}</div> : null}
                  </td>
                  <td class="wrap small">{endpoint.events.join(', ')}</td>
                  <td>
                    <span class={`badge ${endpoint.status}`}>{endpoint.status}</span>
                    {endpoint.disabled_reason === 'failing' ? (
                      <div class="small">its deliveries kept failing</div>
                    ) : null}
                  </td>
                  <td class="row-actions">
                    <button
                      type="button"
                      class="small"
                      onClick={() => setSelected(endpoint.id)}
                      aria-pressed={endpoint.id === selected}
                    >
                      Deliveries <span class="visually-hidden">of {endpoint.url}</span>
                    </button>
                    <button
                      type="button"
                      class="secondary small"
                      disabled={action.busy}
                      onClick={() =>
                        void setStatus(
                          endpoint,
                          endpoint.status === 'enabled' ? 'disabled' : 'enabled',
                        )
                      }
                    >
                      {endpoint.status === 'enabled' ? 'Disable' : 'Enable'}{' '}
                      <span class="visually-hidden">{endpoint.url}</span>
                    </button>
                    <button
                      type="button"
                      class="secondary small"
                      disabled={action.busy || endpoint.status !== 'enabled'}
                      onClick={() =>
                        void action.run(async () => {
                          await api('POST', `/v1/webhook-endpoints/${endpoint.id}/test`);
                          setMessage(`A ping event is on its way to ${endpoint.url}.`);
                          setSelected(endpoint.id);
                        })
                      }
                    >
                      Send a ping <span class="visually-hidden">to {endpoint.url}</span>
                    </button>
                    <button
                      type="button"
                      class="danger small"
                      onClick={() => setDeleting(endpoint)}
                    >
                      Delete <span class="visually-hidden">{endpoint.url}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
        ) : null}
        <More hasMore={endpoints.hasMore} loading={endpoints.loading} onMore={endpoints.more} />
      </section>
      {current ? <Deliveries key={current.id} endpoint={current} /> : null}
      {deleting ? (
        <ConfirmDialog
          title="Delete this endpoint?"
          confirm="Delete the endpoint"
          onClose={() => setDeleting(null)}
          onConfirm={async () => {
            await api('DELETE', `/v1/webhook-endpoints/${deleting.id}`);
            if (selected === deleting.id) setSelected(null);
            endpoints.reload();
          }}
        >
          <p>
            Nothing more is sent to <code>{deleting.url}</code>, and its delivery log goes with it.
          </p>
        </ConfirmDialog>
      ) : null}
    </>
  );
}

function Deliveries({ endpoint }: { endpoint: WebhookEndpoint }) {
  const deliveries = usePaged<WebhookDelivery>(
    (after) =>
      api<Page<WebhookDelivery>>('GET', `/v1/webhook-endpoints/${endpoint.id}/deliveries`, {
        query: { limit: 25, starting_after: after },
      }),
    (delivery) => delivery.id,
    [endpoint.id],
  );
  const action = useAction();
  const [message, setMessage] = useState<string | null>(null);
  return (
    <section aria-labelledby="deliveries-title">
      <div class="section-header">
        <h2 id="deliveries-title">
          Deliveries to <code>{endpoint.url}</code>
        </h2>
        <button type="button" class="secondary small" onClick={deliveries.reload}>
          Refresh
        </button>
      </div>
      {message ? <Notice>{message}</Notice> : null}
      <ErrorNotice error={deliveries.error ?? action.error} />
      {deliveries.loading && deliveries.items.length === 0 ? <Loading /> : null}
      {!deliveries.loading && !deliveries.error && deliveries.items.length === 0 ? (
        <Empty>Nothing was sent to this endpoint yet.</Empty>
      ) : null}
      {deliveries.items.length > 0 ? (
        <TableWrap label="Deliveries">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col" class="number">
                Attempt
              </th>
              <th scope="col">Status</th>
              <th scope="col" class="number">
                Response
              </th>
              <th scope="col" class="number">
                Duration
              </th>
              <th scope="col">At</th>
              <th scope="col">
                <span class="visually-hidden">Actions</span>
              </th>
            </tr>
          </thead>
          <tbody data-testid="deliveries">
            {deliveries.items.map((delivery) => (
              <tr key={delivery.id}>
                <td class="wrap">
                  {delivery.event_type}
                  <div class="small">
                    <code>{delivery.event_id}</code>
                  </div>
                </td>
                <td class="number">{delivery.attempt}</td>
                <td>
                  <span class={`badge ${delivery.status}`}>{delivery.status}</span>
                  {delivery.error ? <div class="small wrap">{delivery.error}</div> : null}
                </td>
                <td class="number">{delivery.response_status ?? '—'}</td>
                <td class="number">
                  {delivery.duration_ms === null ? '—' : `${formatNumber(delivery.duration_ms)} ms`}
                </td>
                <td>
                  {formatTime(delivery.created_at)}
                  {delivery.status === 'pending' && delivery.next_attempt_at ? (
                    <div class="small">due {formatTime(delivery.next_attempt_at)}</div>
                  ) : null}
                </td>
                <td>
                  <button
                    type="button"
                    class="small"
                    disabled={action.busy || endpoint.status !== 'enabled'}
                    onClick={() =>
                      void action.run(async () => {
                        const again = await api<WebhookDelivery>(
                          'POST',
                          `/v1/webhook-endpoints/${endpoint.id}/deliveries/${delivery.id}/redeliver`,
                        );
                        setMessage(
                          `${delivery.event_type} is sent again now (attempt ${again.attempt}).`,
                        );
                        deliveries.reload();
                      })
                    }
                  >
                    Redeliver{' '}
                    <span class="visually-hidden">
                      {delivery.event_type}, attempt {delivery.attempt}
                    </span>
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      ) : null}
      <More hasMore={deliveries.hasMore} loading={deliveries.loading} onMore={deliveries.more} />
    </section>
  );
}

function CreateEndpoint(props: { onCreated: (endpoint: WebhookEndpoint) => void }) {
  const [url, setUrl] = useState('');
  const [description, setDescription] = useState('');
  const [events, setEvents] = useState<string[]>([]);
  const action = useAction();
  return (
    <section>
      <h2>New endpoint</h2>
      <form
        class="grid"
        onSubmit={(event) => {
          event.preventDefault();
          void action.run(async () => {
            const created = await api<WebhookEndpoint>('POST', '/v1/webhook-endpoints', {
              body: { url, events, ...(description ? { description } : {}) },
            });
            setUrl('');
            setDescription('');
            setEvents([]);
            props.onCreated(created);
          });
        }}
      >
        <label>
          URL
          <input
            type="url"
            required
            placeholder="https://example.com/webhooks"
            value={url}
            onInput={(e) => setUrl(e.currentTarget.value)}
          />
        </label>
        <label>
          Description (optional)
          <input
            maxLength={500}
            value={description}
            onInput={(e) => setDescription(e.currentTarget.value)}
          />
        </label>
        <fieldset class="checks">
          <legend>Events</legend>
          {WEBHOOK_EVENT_TYPES.map((type) => (
            <label key={type} class="check">
              <input
                type="checkbox"
                checked={events.includes(type)}
                onChange={(e) =>
                  setEvents(
                    e.currentTarget.checked ? [...events, type] : events.filter((t) => t !== type),
                  )
                }
              />
              {type}
            </label>
          ))}
        </fieldset>
        <div class="actions">
          <button type="submit" disabled={action.busy || events.length === 0}>
            Add the endpoint
          </button>
        </div>
      </form>
      <ErrorNotice error={action.error} />
    </section>
  );
}
