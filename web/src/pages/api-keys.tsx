import { useState } from 'preact/hooks';
import { api } from '../api';
import { formatDecimal, formatTime } from '../format';
import { useOrganization } from '../session';
import { type ApiKey, type CreatedApiKey, type Page, SCOPES, type Scope } from '../types';
import {
  ConfirmDialog,
  Empty,
  ErrorNotice,
  Loading,
  More,
  PageTitle,
  SecretOnce,
  TableWrap,
  useAction,
  usePaged,
  SelectField,
} from '../ui';

const SCOPE_TEXT: Record<Scope, string> = {
  read: 'read: reads only',
  read_write: 'read_write: end users, personalities, replies',
  admin: 'admin: everything, keys and webhooks too',
};

const ROLL_OVERLAPS: Array<[number, string]> = [
  [0, 'at once'],
  [3600, 'in an hour'],
  [86_400, 'in a day'],
  [7 * 86_400, 'in a week'],
];

/** The API's own default for a roll's overlap (contract §18). */
const DEFAULT_ROLL_OVERLAP = 86_400;

/** API keys: list, create (scope, rate limit; the key shown once), roll, revoke. */
export function ApiKeysPage() {
  const organization = useOrganization();
  const keys = usePaged<ApiKey>(
    (after) =>
      api<Page<ApiKey>>('GET', '/v1/api-keys', { query: { limit: 50, starting_after: after } }),
    (key) => key.id,
    [organization.id],
  );
  const [secret, setSecret] = useState<{ label: string; key: string } | null>(null);
  const [revoking, setRevoking] = useState<ApiKey | null>(null);
  const [rolling, setRolling] = useState<ApiKey | null>(null);
  const [overlap, setOverlap] = useState(DEFAULT_ROLL_OVERLAP);

  return (
    <>
      <PageTitle title="API keys" />
      <p>
        Keys act for the organization from your servers. A key is shown once, when it is made or
        rolled.
      </p>
      {secret ? (
        <SecretOnce label={secret.label} secret={secret.key} onDone={() => setSecret(null)} />
      ) : null}
      <CreateKey
        onCreated={(created) => {
          if (created.key) setSecret({ label: `The new key "${created.name}"`, key: created.key });
          keys.reload();
        }}
      />
      <section>
        <h2>Keys</h2>
        <ErrorNotice error={keys.error} />
        {keys.loading && keys.items.length === 0 ? <Loading /> : null}
        {!keys.loading && !keys.error && keys.items.length === 0 ? (
          <Empty>No API keys yet.</Empty>
        ) : null}
        {keys.items.length > 0 ? (
          <TableWrap label="API keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Key</th>
                <th scope="col">Scopes</th>
                <th scope="col">Rate limit</th>
                <th scope="col">Last used</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody data-testid="api-keys">
              {keys.items.map((key) => (
                <tr key={key.id}>
                  <td class="wrap">{key.name}</td>
                  <td>
                    <code>
                      {key.prefix}…{key.last_four}
                    </code>
                  </td>
                  <td>{key.scopes.join(', ')}</td>
                  <td>
                    {key.rate_limit
                      ? `${formatDecimal(key.rate_limit.rps)}/s, burst ${key.rate_limit.burst}`
                      : '—'}
                  </td>
                  <td>{formatTime(key.last_used_at)}</td>
                  <td>{key.expires_at ? formatTime(key.expires_at) : 'never'}</td>
                  <td class="row-actions">
                    <button type="button" class="secondary small" onClick={() => setRolling(key)}>
                      Roll <span class="visually-hidden">{key.name}</span>
                    </button>
                    <button type="button" class="danger small" onClick={() => setRevoking(key)}>
                      Revoke <span class="visually-hidden">{key.name}</span>
                    </button>
                  </td>
                </tr>
              ))}
            </tbody>
          </TableWrap>
        ) : null}
        <More hasMore={keys.hasMore} loading={keys.loading} onMore={keys.more} />
      </section>
      {revoking ? (
        <ConfirmDialog
          title={`Revoke the key "${revoking.name}"?`}
          confirm="Revoke the key"
          onClose={() => setRevoking(null)}
          onConfirm={async () => {
            await api('DELETE', `/v1/api-keys/${revoking.id}`);
            keys.reload();
          }}
        >
          <p>It is refused at once, wherever it is used. This cannot be undone.</p>
        </ConfirmDialog>
      ) : null}
      {rolling ? (
        <ConfirmDialog
          title={`Roll the key "${rolling.name}"?`}
          confirm="Roll the key"
          onClose={() => {
            setRolling(null);
            // Each roll starts from the default overlap, not the last one picked (found by review).
            setOverlap(DEFAULT_ROLL_OVERLAP);
          }}
          onConfirm={async () => {
            const created = await api<CreatedApiKey>('POST', `/v1/api-keys/${rolling.id}/roll`, {
              body: { expires_in_seconds: overlap },
            });
            if (created.key)
              setSecret({ label: `The new key replacing "${created.name}"`, key: created.key });
            keys.reload();
          }}
        >
          <p>A new key with the same name and scopes replaces it.</p>
          <SelectField
            label="The old key stops working"
            value={overlap}
            onChange={(event) => setOverlap(Number(event.currentTarget.value))}
          >
            {ROLL_OVERLAPS.map(([seconds, text]) => (
              <option key={seconds} value={seconds}>
                {text}
              </option>
            ))}
          </SelectField>
        </ConfirmDialog>
      ) : null}
    </>
  );
}

function CreateKey(props: { onCreated: (key: CreatedApiKey) => void }) {
  const [name, setName] = useState('');
  const [scope, setScope] = useState<Scope>('read_write');
  const [rps, setRps] = useState('');
  const [burst, setBurst] = useState('');
  const action = useAction();
  return (
    <section>
      <h2>New key</h2>
      <form
        class="grid"
        onSubmit={(event) => {
          event.preventDefault();
          void action.run(async () => {
            const created = await api<CreatedApiKey>('POST', '/v1/api-keys', {
              body: {
                name,
                scopes: [scope],
                ...(rps || burst ? { rate_limit: { rps: Number(rps), burst: Number(burst) } } : {}),
              },
            });
            setName('');
            setRps('');
            setBurst('');
            props.onCreated(created);
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
        <SelectField
          label="Scope"
          value={scope}
          onChange={(e) => setScope(e.currentTarget.value as Scope)}
        >
          {SCOPES.map((s) => (
            <option key={s} value={s}>
              {SCOPE_TEXT[s]}
            </option>
          ))}
        </SelectField>
        <fieldset>
          <legend>Rate limit of its own (optional)</legend>
          <label>
            Requests per second
            <input
              type="number"
              min="0.001"
              step="any"
              inputMode="decimal"
              value={rps}
              required={burst !== ''}
              onInput={(e) => setRps(e.currentTarget.value)}
            />
          </label>
          <label>
            Burst
            <input
              type="number"
              min="1"
              step="1"
              inputMode="numeric"
              value={burst}
              required={rps !== ''}
              onInput={(e) => setBurst(e.currentTarget.value)}
            />
          </label>
        </fieldset>
        <div class="actions">
          <button type="submit" disabled={action.busy}>
            Create the key
          </button>
        </div>
      </form>
      <ErrorNotice error={action.error} />
    </section>
  );
}
