import { useMemo, useState } from 'preact/hooks';
import { ApiError, all, api } from '../api';
import { UsageChart } from '../chart';
import { currentMonth, daysOf, download, formatNumber, toCsv } from '../format';
import { useOrganization } from '../session';
import type { ApiKey, Breakdown, BreakdownItem, Limits, Personality, TokenUsage } from '../types';
import {
  Empty,
  ErrorNotice,
  Loading,
  More,
  PageTitle,
  TableWrap,
  useLoad,
  usePaged,
  SelectField,
} from '../ui';

const GROUPS = {
  personality: 'Personality',
  end_user: 'End user',
  model: 'Model',
  api_key: 'API key',
} as const;
type Group = keyof typeof GROUPS;

const total = (item: { prompt_tokens: number; completion_tokens: number }) =>
  item.prompt_tokens + item.completion_tokens;

/** The month's figures: tokens by day (chart, table), the budget, and one breakdown. */
export function UsagePage() {
  const organization = useOrganization();
  const [month, setMonth] = useState(currentMonth());
  const [group, setGroup] = useState<Group>('personality');

  const overview = useLoad(async () => {
    const [days, tokens, limits] = await Promise.all([
      api<Breakdown>('GET', '/v1/usage/breakdown', {
        query: { month, group_by: 'day', limit: 31 },
      }),
      api<TokenUsage>('GET', '/v1/usage/tokens', { query: { month } }),
      api<Limits>('GET', `/v1/organizations/${organization.id}/limits`),
    ]);
    return { days: days.data, tokens, budget: limits.monthly_token_budget };
  }, [organization.id, month]);

  const names = useLoad(() => namesOf(group), [organization.id, group]);
  const breakdown = usePaged<BreakdownItem>(
    (after) =>
      api<Breakdown>('GET', '/v1/usage/breakdown', {
        query: { month, group_by: group, limit: 100, starting_after: after },
      }),
    (item) => item.key ?? '',
    [organization.id, month, group],
  );

  const days = useMemo(() => {
    if (!overview.data) return [];
    const byDay = new Map(overview.data.days.map((item) => [item.key!, item]));
    return daysOf(month).map((day) => {
      const item = byDay.get(day);
      return {
        day,
        requests: item?.requests ?? 0,
        prompt_tokens: item?.prompt_tokens ?? 0,
        completion_tokens: item?.completion_tokens ?? 0,
        cached_tokens: item?.cached_tokens ?? 0,
        tokens: item ? total(item) : 0,
      };
    });
  }, [overview.data, month]);

  const monthTokens = overview.data ? total(overview.data.tokens) : 0;
  const budget = overview.data?.budget ?? null;
  const label = (key: string | null) => nameOf(group, key, names.data);

  return (
    <>
      <PageTitle title="Usage">
        <form class="inline" onSubmit={(event) => event.preventDefault()}>
          <label>
            Month (UTC)
            <input
              type="month"
              value={month}
              max={currentMonth()}
              min="1970-01"
              required
              onChange={(event) => event.currentTarget.value && setMonth(event.currentTarget.value)}
            />
          </label>
        </form>
      </PageTitle>
      <p class="small">
        Tokens the model provider reported for the organization's replies. Days and months are UTC;
        a reply counts within a minute.
      </p>
      <ErrorNotice error={overview.error} />
      {overview.loading && !overview.data ? <Loading what="Loading the month" /> : null}
      {overview.data ? (
        <>
          <dl class="figures" aria-label="The month's figures">
            <div>
              <dt>Tokens in {month}</dt>
              <dd data-testid="month-total">{formatNumber(monthTokens)}</dd>
            </div>
            <div>
              <dt>Replies</dt>
              <dd>{formatNumber(overview.data.tokens.requests)}</dd>
            </div>
            <div>
              <dt>Monthly budget</dt>
              <dd>{budget === null ? 'None' : formatNumber(budget)}</dd>
            </div>
            {budget !== null ? (
              <div>
                <dt>Budget used</dt>
                <dd>{Math.round((monthTokens / budget) * 100)} %</dd>
              </div>
            ) : null}
          </dl>
          <figure>
            <UsageChart
              days={days}
              budget={budget}
              label={`Tokens per day in ${month} (UTC), with the month so far${budget === null ? '' : ' against the monthly budget'}`}
            />
            <figcaption>
              Bars: tokens per day (left axis). Lines: the month so far
              {budget === null ? '' : ' and the monthly budget'} (right axis). UTC days.
            </figcaption>
          </figure>
          <div class="actions">
            <button
              type="button"
              class="secondary"
              onClick={() =>
                download(
                  `usage-${month}-by-day.csv`,
                  toCsv(
                    [
                      'day_utc',
                      'requests',
                      'prompt_tokens',
                      'completion_tokens',
                      'cached_tokens',
                      'total_tokens',
                    ],
                    days.map((d) => [
                      d.day,
                      d.requests,
                      d.prompt_tokens,
                      d.completion_tokens,
                      d.cached_tokens,
                      d.tokens,
                    ]),
                  ),
                )
              }
            >
              Download the days (CSV)
            </button>
          </div>
          <details>
            <summary>Figures by day</summary>
            <TableWrap label={`Tokens per day in ${month}`}>
              <caption class="visually-hidden">Tokens per UTC day in {month}</caption>
              <thead>
                <tr>
                  <th scope="col">Day (UTC)</th>
                  <th scope="col" class="number">
                    Replies
                  </th>
                  <th scope="col" class="number">
                    Prompt
                  </th>
                  <th scope="col" class="number">
                    Completion
                  </th>
                  <th scope="col" class="number">
                    Tokens
                  </th>
                </tr>
              </thead>
              <tbody data-testid="days">
                {days.map((d) => (
                  <tr key={d.day}>
                    <td>{d.day}</td>
                    <td class="number">{formatNumber(d.requests)}</td>
                    <td class="number">{formatNumber(d.prompt_tokens)}</td>
                    <td class="number">{formatNumber(d.completion_tokens)}</td>
                    <td class="number">{formatNumber(d.tokens)}</td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
          </details>
        </>
      ) : null}

      <section>
        <div class="section-header">
          <h2>Breakdown</h2>
          <SelectField
            label="Break down by"
            value={group}
            onChange={(event) => setGroup(event.currentTarget.value as Group)}
          >
            {Object.entries(GROUPS).map(([value, text]) => (
              <option key={value} value={value}>
                {text}
              </option>
            ))}
          </SelectField>
        </div>
        <ErrorNotice error={breakdown.error} />
        {breakdown.loading && breakdown.items.length === 0 ? <Loading /> : null}
        {!breakdown.loading && !breakdown.error && breakdown.items.length === 0 ? (
          <Empty>No tokens in {month}.</Empty>
        ) : null}
        {breakdown.items.length > 0 ? (
          <>
            <TableWrap label={`Tokens by ${GROUPS[group].toLowerCase()} in ${month}`}>
              <thead>
                <tr>
                  <th scope="col">{GROUPS[group]}</th>
                  <th scope="col" class="number">
                    Replies
                  </th>
                  <th scope="col" class="number">
                    Prompt
                  </th>
                  <th scope="col" class="number">
                    Completion
                  </th>
                  <th scope="col" class="number">
                    Cached
                  </th>
                  <th scope="col" class="number">
                    Tokens
                  </th>
                  <th scope="col">Share</th>
                </tr>
              </thead>
              <tbody data-testid="breakdown">
                {breakdown.items.map((item) => (
                  <tr key={item.key ?? '(null)'}>
                    <td class="wrap">{label(item.key)}</td>
                    <td class="number">{formatNumber(item.requests)}</td>
                    <td class="number">{formatNumber(item.prompt_tokens)}</td>
                    <td class="number">{formatNumber(item.completion_tokens)}</td>
                    <td class="number">{formatNumber(item.cached_tokens)}</td>
                    <td class="number">{formatNumber(total(item))}</td>
                    <td>
                      <meter
                        min={0}
                        max={1}
                        value={monthTokens > 0 ? total(item) / monthTokens : 0}
                        aria-label={`Share of ${label(item.key)}`}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </TableWrap>
            <div class="actions">
              <More
                hasMore={breakdown.hasMore}
                loading={breakdown.loading}
                onMore={breakdown.more}
              />
              <button
                type="button"
                class="secondary"
                onClick={() =>
                  download(
                    `usage-${month}-by-${group}.csv`,
                    toCsv(
                      [
                        group,
                        'name',
                        'requests',
                        'prompt_tokens',
                        'completion_tokens',
                        'cached_tokens',
                        'total_tokens',
                      ],
                      breakdown.items.map((item) => [
                        item.key,
                        label(item.key),
                        item.requests,
                        item.prompt_tokens,
                        item.completion_tokens,
                        item.cached_tokens,
                        total(item),
                      ]),
                    ),
                  )
                }
              >
                Download the breakdown (CSV)
              </button>
            </div>
          </>
        ) : null}
      </section>
    </>
  );
}

/** Names for a breakdown's keys: personalities' and keys' names (a member may not list keys). */
async function namesOf(group: Group): Promise<Map<string, string>> {
  try {
    if (group === 'personality') {
      const personalities = await all<Personality>('/v1/personalities');
      return new Map(personalities.map((p) => [p.id, p.name]));
    }
    if (group === 'api_key') {
      const keys = await all<ApiKey>('/v1/api-keys');
      return new Map(keys.map((k) => [k.id, k.name]));
    }
  } catch (error) {
    if (!(error instanceof ApiError) || error.status !== 403) throw error;
  }
  return new Map();
}

function nameOf(group: Group, key: string | null, names: Map<string, string> | undefined): string {
  if (key === null) return 'Signed-in users (access tokens)';
  const name = names?.get(key);
  if (group === 'personality') return name ?? `Deleted personality ${key.slice(0, 8)}`;
  if (group === 'api_key')
    return name ? `${name} (${key.slice(0, 8)})` : `Key ${key.slice(0, 8)} (revoked or not listed)`;
  return key;
}
