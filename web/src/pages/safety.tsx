import { useEffect, useMemo, useState } from 'preact/hooks';
import { api } from '../api';
import { formatTime } from '../format';
import { canManage, useOrganization } from '../session';
import {
  type AuditEvent,
  type Limits,
  MODERATION_MODES,
  type Page,
  type SafetySettings,
} from '../types';
import {
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
  SelectField,
} from '../ui';

/** The settings of contract §22 and §23 as forms, and the exchanges safety flagged (never their text). */
export function SafetyPage() {
  const organization = useOrganization();
  return (
    <>
      <PageTitle title="Safety and spend" />
      {!canManage(organization) ? (
        <p class="small">Owners and admins change these settings; you may read them.</p>
      ) : null}
      <SafetyForm key={`safety-${organization.id}`} />
      <LimitsForm key={`limits-${organization.id}`} />
      <Flagged key={`flagged-${organization.id}`} />
    </>
  );
}

const MODE_TEXT = { off: 'off', flag: 'flag (record only)', block: 'block' } as const;

function SafetyForm() {
  const organization = useOrganization();
  const path = `/v1/organizations/${organization.id}/safety`;
  const loaded = useLoad(() => api<SafetySettings>('GET', path), [path]);
  const { form, set, changed, saved, justSaved } = useEditedCopy(loaded.data);
  const action = useAction();
  const save = (body: Record<string, unknown>) =>
    action.run(async () =>
      saved(
        Object.keys(body).length === 0
          ? undefined
          : await api<SafetySettings>('PATCH', path, { body }),
      ),
    );
  return (
    <section>
      <h2>Safety</h2>
      <p class="small">
        Crisis response on: a message expressing suicidal ideation or self-harm gets a careful reply
        that ends with the crisis message. Moderation of sexual content involving minors and of
        violence: flag records it, block refuses it.
      </p>
      <ErrorNotice error={loaded.error} />
      {!form ? (
        loaded.loading ? (
          <Loading />
        ) : null
      ) : (
        <form
          class="grid"
          onSubmit={(event) => {
            event.preventDefault();
            // Only what the user changed: the default crisis message sent back would be stored
            // as the organization's own, no longer following the default, and a setting another
            // admin changed meanwhile would be put back (found by review).
            void save(changed());
          }}
        >
          <SelectField
            label="Crisis response"
            value={form.crisis_response}
            onChange={(e) => set({ crisis_response: e.currentTarget.value as 'on' | 'off' })}
          >
            <option value="on">on</option>
            <option value="off">off</option>
          </SelectField>
          <label class="wide">
            Crisis message
            <textarea
              rows={4}
              required
              maxLength={1000}
              value={form.crisis_message}
              onInput={(e) => set({ crisis_message: e.currentTarget.value })}
            />
          </label>
          <SelectField
            label="Input moderation"
            value={form.input_moderation}
            onChange={(e) =>
              set({
                input_moderation: e.currentTarget.value as SafetySettings['input_moderation'],
              })
            }
          >
            {MODERATION_MODES.map((mode) => (
              <option key={mode} value={mode}>
                {MODE_TEXT[mode]}
              </option>
            ))}
          </SelectField>
          <SelectField
            label="Output moderation"
            value={form.output_moderation}
            onChange={(e) =>
              set({
                output_moderation: e.currentTarget.value as SafetySettings['output_moderation'],
              })
            }
          >
            {MODERATION_MODES.map((mode) => (
              <option key={mode} value={mode}>
                {MODE_TEXT[mode]}
              </option>
            ))}
          </SelectField>
          <div class="actions wide">
            <button type="submit" disabled={action.busy}>
              Save the safety settings
            </button>
            <button
              type="button"
              class="secondary"
              disabled={action.busy}
              onClick={() => void save({ crisis_message: null })}
            >
              Restore the default crisis message
            </button>
          </div>
          <ErrorNotice error={action.error} />
          {justSaved ? <Notice>Saved.</Notice> : null}
        </form>
      )}
    </section>
  );
}

/**
 * A form's copy of `read`, which the user edits, beside the values last read or saved: a save
 * sends only the fields `changed()` names, and with none it sends nothing (an empty PATCH wrote
 * an audit event of no change).
 */
function useEditedCopy<T extends object>(read: T | undefined) {
  const [copy, setCopy] = useState<{ base: T; form: T; justSaved: boolean } | null>(null);
  useEffect(() => setCopy(read ? { base: read, form: read, justSaved: false } : null), [read]);
  return {
    form: copy?.form ?? null,
    justSaved: copy?.justSaved ?? false,
    set: (change: Partial<T>) =>
      setCopy(
        (previous) =>
          previous && { ...previous, form: { ...previous.form, ...change }, justSaved: false },
      ),
    /** The fields that differ from the values last read or saved. */
    changed: (): Partial<T> =>
      copy
        ? (Object.fromEntries(
            Object.entries(copy.form).filter(([key, value]) => copy.base[key as keyof T] !== value),
          ) as Partial<T>)
        : {},
    /** The answer of a save, or undefined when nothing was sent: the form as it stands. */
    saved: (value?: T) =>
      setCopy(
        (previous) =>
          previous && {
            base: value ?? previous.form,
            form: value ?? previous.form,
            justSaved: true,
          },
      ),
  };
}

interface LimitsFields {
  monthly: string;
  daily: string;
  rps: string;
  burst: string;
}

const fieldsOf = (limits: Limits): LimitsFields => ({
  monthly: limits.monthly_token_budget?.toString() ?? '',
  daily: limits.end_user_daily_token_budget?.toString() ?? '',
  rps: limits.end_user_rate_limit?.rps.toString() ?? '',
  burst: limits.end_user_rate_limit?.burst.toString() ?? '',
});

function LimitsForm() {
  const organization = useOrganization();
  const path = `/v1/organizations/${organization.id}/limits`;
  const loaded = useLoad(() => api<Limits>('GET', path), [path]);
  const read = useMemo(() => loaded.data && fieldsOf(loaded.data), [loaded.data]);
  const { form, set, changed: changedFields, saved, justSaved } = useEditedCopy(read);
  const action = useAction();
  const number = (text: string) => (text.trim() === '' ? null : Number(text));
  return (
    <section>
      <h2>Spend</h2>
      <p class="small">
        Empty: no limit. Budgets count provider tokens (prompt + completion), UTC months and days.
      </p>
      <ErrorNotice error={loaded.error} />
      {!form ? (
        loaded.loading ? (
          <Loading />
        ) : null
      ) : (
        <form
          class="grid"
          onSubmit={(event) => {
            event.preventDefault();
            void action.run(async () => {
              // Only the limits the user changed: one another admin set meanwhile stays.
              const changed = changedFields();
              const rps = number(form.rps);
              const burst = number(form.burst);
              const body: Record<string, unknown> = {};
              if ('monthly' in changed) body.monthly_token_budget = number(form.monthly);
              if ('daily' in changed) body.end_user_daily_token_budget = number(form.daily);
              if ('rps' in changed || 'burst' in changed) {
                body.end_user_rate_limit = rps === null && burst === null ? null : { rps, burst };
              }
              saved(
                Object.keys(body).length === 0
                  ? undefined
                  : fieldsOf(await api<Limits>('PATCH', path, { body })),
              );
            });
          }}
        >
          <label>
            Monthly token budget
            <input
              type="number"
              min="1"
              step="1"
              inputMode="numeric"
              value={form.monthly}
              onInput={(e) => set({ monthly: e.currentTarget.value })}
            />
          </label>
          <label>
            Daily token budget per end user
            <input
              type="number"
              min="1"
              step="1"
              inputMode="numeric"
              value={form.daily}
              onInput={(e) => set({ daily: e.currentTarget.value })}
            />
          </label>
          <fieldset>
            <legend>Rate limit per end user</legend>
            <label>
              Replies per second
              <input
                type="number"
                min="0.001"
                step="any"
                inputMode="decimal"
                value={form.rps}
                required={form.burst !== ''}
                onInput={(e) => set({ rps: e.currentTarget.value })}
              />
            </label>
            <label>
              Burst
              <input
                type="number"
                min="1"
                step="1"
                inputMode="numeric"
                value={form.burst}
                required={form.rps !== ''}
                onInput={(e) => set({ burst: e.currentTarget.value })}
              />
            </label>
          </fieldset>
          <div class="actions wide">
            <button type="submit" disabled={action.busy}>
              Save the limits
            </button>
          </div>
          <ErrorNotice error={action.error} />
          {justSaved ? <Notice>Saved.</Notice> : null}
        </form>
      )}
    </section>
  );
}

function Flagged() {
  const organization = useOrganization();
  const events = usePaged<AuditEvent>(
    (after) =>
      api<Page<AuditEvent>>('GET', '/v1/audit-events', {
        query: { action: 'conversation.flagged', limit: 50, starting_after: after },
      }),
    (event) => event.id,
    [organization.id],
  );
  return (
    <section>
      <h2>Flagged exchanges</h2>
      <p class="small">
        From the audit log: who, with which personality, what was detected and done. Never the text.
      </p>
      <ErrorNotice error={events.error} />
      {events.loading && events.items.length === 0 ? <Loading /> : null}
      {!events.loading && !events.error && events.items.length === 0 ? (
        <Empty>Nothing was flagged.</Empty>
      ) : null}
      {events.items.length > 0 ? (
        <TableWrap label="Flagged exchanges">
          <thead>
            <tr>
              <th scope="col">At</th>
              <th scope="col">End user</th>
              <th scope="col">Categories</th>
              <th scope="col">Action</th>
              <th scope="col">Personality</th>
            </tr>
          </thead>
          <tbody>
            {events.items.map((event) => (
              <tr key={event.id}>
                <td>{formatTime(event.created_at)}</td>
                <td class="wrap">{event.target.id}</td>
                <td>
                  {Array.isArray(event.details.categories)
                    ? event.details.categories.join(', ')
                    : '—'}
                </td>
                <td>{textOf(event.details.action)}</td>
                <td>
                  <code>{textOf(event.details.personality_id).slice(0, 8)}</code>
                </td>
              </tr>
            ))}
          </tbody>
        </TableWrap>
      ) : null}
      <More hasMore={events.hasMore} loading={events.loading} onMore={events.more} />
    </section>
  );
}

/** A detail that should be a string, as text ('—' when it is not). */
const textOf = (value: unknown) => (typeof value === 'string' ? value : '—');
