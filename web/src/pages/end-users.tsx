import { useState } from 'preact/hooks';
import { ApiError, api, segment } from '../api';
import { download, formatTime, jsonText, visibleId } from '../format';
import { useOrganization } from '../session';
import type { EndUser, Fact, Memory, Page, ToolCall } from '../types';
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
  useLoad,
  usePaged,
} from '../ui';

/** End users: find one by user_id; memories (with tool calls), facts, export, erasure. */
export function EndUsersPage() {
  const organization = useOrganization();
  const [query, setQuery] = useState('');
  const [userId, setUserId] = useState<string | null>(null);
  const list = usePaged<EndUser>(
    (after) =>
      api<Page<EndUser>>('GET', '/v1/end-users', { query: { limit: 20, starting_after: after } }),
    (user) => user.user_id,
    [organization.id],
  );
  return (
    <>
      <PageTitle title="End users" />
      <form
        class="inline"
        role="search"
        onSubmit={(event) => {
          event.preventDefault();
          // The id as typed: a user_id is exact, and ` bob` is not `bob` (found by review).
          if (query.trim()) setUserId(query);
        }}
      >
        <label>
          Find an end user by user_id
          <input
            required
            maxLength={256}
            value={query}
            onInput={(e) => setQuery(e.currentTarget.value)}
          />
        </label>
        <button type="submit">Find</button>
      </form>
      {userId ? (
        <EndUserPanel
          key={userId}
          userId={userId}
          onErased={() => {
            list.reload();
          }}
        />
      ) : null}
      <section>
        <h2>Recent end users</h2>
        <ErrorNotice error={list.error} />
        {list.loading && list.items.length === 0 ? <Loading /> : null}
        {!list.loading && !list.error && list.items.length === 0 ? (
          <Empty>No end users yet.</Empty>
        ) : null}
        {list.items.length > 0 ? (
          <ul class="plain-list">
            {list.items.map((user) => (
              <li key={user.user_id}>
                <button type="button" class="link id" onClick={() => setUserId(user.user_id)}>
                  {visibleId(user.user_id)}
                </button>{' '}
                {user.status === 'deleting' ? (
                  <span class="badge deleting">being erased</span>
                ) : null}
              </li>
            ))}
          </ul>
        ) : null}
        <More hasMore={list.hasMore} loading={list.loading} onMore={list.more} />
      </section>
    </>
  );
}

/** An id in a sentence: in quotation marks, or as visibleId quotes it. */
const quotedId = (id: string) => (visibleId(id) === id ? `“${id}”` : visibleId(id));

function EndUserPanel(props: { userId: string; onErased: () => void }) {
  const path = `/v1/end-users/${segment(props.userId)}`;
  const user = useLoad(
    () =>
      // A URL's dot segments are removed before it is sent, whatever their encoding: the path
      // would name the list, or another end user's facts (found by review).
      props.userId === '.' || props.userId === '..'
        ? Promise.reject(
            new ApiError(
              0,
              'unaddressable',
              `The user_id “${props.userId}” cannot be sent in a URL: no browser keeps it as a path segment.`,
              null,
            ),
          )
        : api<EndUser>('GET', path),
    [path],
  );
  const [erasing, setErasing] = useState(false);
  const [erased, setErased] = useState(false);
  const exporting = useAction();
  if (user.loading && !user.data) return <Loading what="Finding the end user" />;
  if (user.error) {
    return user.error instanceof ApiError && user.error.status === 404 ? (
      <Empty>No end user has the user_id {quotedId(props.userId)}.</Empty>
    ) : (
      <ErrorNotice error={user.error} />
    );
  }
  const data = user.data!;
  return (
    <section class="card" aria-labelledby="end-user-title">
      <h2 id="end-user-title" class="wrap id">
        {visibleId(data.user_id)}
      </h2>
      {erased || data.status === 'deleting' ? (
        <Notice>This end user is being erased: all their data goes within the grace period.</Notice>
      ) : null}
      <dl class="facts">
        <div>
          <dt>Status</dt>
          <dd>{data.status}</dd>
        </div>
        <div>
          <dt>Created</dt>
          <dd>{formatTime(data.created_at)}</dd>
        </div>
        <div>
          <dt>Metadata</dt>
          <dd>
            <pre>{jsonText(data.metadata)}</pre>
          </dd>
        </div>
      </dl>
      <div class="actions">
        <button
          type="button"
          class="secondary"
          disabled={exporting.busy}
          onClick={() =>
            void exporting.run(async () => {
              const response = await api<Response>('GET', `${path}/export`, { raw: true });
              download(`${data.user_id}.pmf.json`, await response.blob());
            })
          }
        >
          {exporting.busy ? 'Exporting…' : 'Export (PMF v1 JSON)'}
        </button>
        {data.status === 'active' && !erased ? (
          <button type="button" class="danger" onClick={() => setErasing(true)}>
            Erase…
          </button>
        ) : null}
      </div>
      <ErrorNotice error={exporting.error} />
      <Facts path={path} />
      <Memories path={path} />
      {erasing ? (
        <ConfirmDialog
          title="Erase this end user?"
          confirm="Erase everything"
          typeToConfirm={data.user_id}
          onClose={() => setErasing(false)}
          onConfirm={async () => {
            await api('DELETE', path);
            setErased(true);
            props.onErased();
          }}
        >
          <p>
            Their memories, facts and activity are deleted for good after the grace period. This
            cannot be undone.
          </p>
        </ConfirmDialog>
      ) : null}
    </section>
  );
}

function Facts({ path }: { path: string }) {
  const facts = usePaged<Fact>(
    (after) =>
      api<Page<Fact>>('GET', `${path}/facts`, { query: { limit: 50, starting_after: after } }),
    (fact) => fact.id,
    [path],
  );
  return (
    <section>
      <h3>Facts</h3>
      <ErrorNotice error={facts.error} />
      {facts.loading && facts.items.length === 0 ? <Loading /> : null}
      {!facts.loading && !facts.error && facts.items.length === 0 ? <Empty>No facts.</Empty> : null}
      {facts.items.length > 0 ? (
        <ul class="plain-list">
          {facts.items.map((fact) => (
            <li key={fact.id}>
              {fact.content}{' '}
              <span class="small">
                ({fact.source}, {formatTime(fact.created_at)})
              </span>
            </li>
          ))}
        </ul>
      ) : null}
      <More hasMore={facts.hasMore} loading={facts.loading} onMore={facts.more} />
    </section>
  );
}

function Memories({ path }: { path: string }) {
  const memories = usePaged<Memory>(
    (after) =>
      api<Page<Memory>>('GET', `${path}/memories`, { query: { limit: 25, starting_after: after } }),
    (memory) => memory.id,
    [path],
  );
  return (
    <section>
      <h3>Memories</h3>
      <ErrorNotice error={memories.error} />
      {memories.loading && memories.items.length === 0 ? <Loading /> : null}
      {!memories.loading && !memories.error && memories.items.length === 0 ? (
        <Empty>No memories.</Empty>
      ) : null}
      {memories.items.length > 0 ? (
        <ol class="memories" reversed>
          {memories.items.map((memory) => (
            <li key={memory.id} class={`memory ${memory.role}`}>
              <div class="small">
                {memory.role === 'user' ? 'End user' : 'Personality'} ·{' '}
                {formatTime(memory.created_at)}
                {memory.emotion ? ` · ${memory.emotion.name}` : ''}
                {memory.safety?.flagged ? (
                  <span class="badge failed">
                    {memory.safety.action}: {memory.safety.categories.join(', ')}
                  </span>
                ) : null}
              </div>
              <p class="content">{memory.content}</p>
              {memory.tool_calls && memory.tool_calls.length > 0 ? (
                <ToolCalls calls={memory.tool_calls} />
              ) : null}
            </li>
          ))}
        </ol>
      ) : null}
      <More hasMore={memories.hasMore} loading={memories.loading} onMore={memories.more} />
    </section>
  );
}

function ToolCalls({ calls }: { calls: ToolCall[] }) {
  return (
    <TableWrap label="Tool calls">
      <thead>
        <tr>
          <th scope="col">Tool</th>
          <th scope="col">Arguments</th>
          <th scope="col">Output</th>
          <th scope="col">Run</th>
        </tr>
      </thead>
      <tbody>
        {calls.map((call) => (
          <tr key={call.id}>
            <td>{call.name}</td>
            <td>
              <pre>{jsonText(call.arguments)}</pre>
            </td>
            <td>
              {call.error ? (
                <span class="badge failed">{call.error}</span>
              ) : (
                <pre>{jsonText(call.output ?? null)}</pre>
              )}
            </td>
            <td class="small">
              {call.execution ?? '—'}
              {typeof call.duration_ms === 'number' ? `, ${call.duration_ms} ms` : ''}
            </td>
          </tr>
        ))}
      </tbody>
    </TableWrap>
  );
}
