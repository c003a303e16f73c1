import { keysetAfter, keysetOrder } from './keyset';
import { sql } from './sql';

const squash = (text: string) => text.replace(/\s+/g, ' ');

describe('keyset paging', () => {
  it('starts after the cursor row of the same scope, newest first', () => {
    const page = {
      table: 'audit_events',
      cursor: 'c0ffee00-0000-4000-8000-000000000000',
      scope: { organization_id: 'org' },
      order: 'desc',
    } as const;
    const statement = sql`SELECT id FROM audit_events WHERE ${keysetAfter(page)} ORDER BY ${keysetOrder(page)}`;
    expect(squash(statement.text)).toBe(
      'SELECT id FROM audit_events WHERE ($1::uuid IS NULL OR (created_at, id) < ( ' +
        'SELECT c.created_at, c.id FROM audit_events c WHERE c.id = $2::uuid AND c.organization_id = $3)) ' +
        'ORDER BY created_at DESC, id DESC',
    );
    expect(statement.values).toEqual([page.cursor, page.cursor, 'org']);
  });

  it('names an alias, a sort column and a cursor column, oldest first', () => {
    const page = {
      table: 'memberships',
      alias: 'm',
      id: 'user_id',
      sortBy: 'created_at',
      cursor: undefined,
      scope: { organization_id: 'org', role: 'owner' },
      order: 'asc',
    } as const;
    expect(squash(keysetAfter(page).text)).toBe(
      '($1::uuid IS NULL OR (m.created_at, m.user_id) > ( SELECT c.created_at, c.user_id ' +
        'FROM memberships c WHERE c.user_id = $2::uuid AND c.organization_id = $3 AND c.role = $4))',
    );
    expect(keysetAfter(page).values).toEqual([null, null, 'org', 'owner']);
    expect(keysetOrder(page).text).toBe('m.created_at, m.user_id');
  });

  it('reads the same with or without a cursor, so a named statement can carry it', () => {
    const page = (cursor: string | undefined) =>
      keysetAfter({ table: 't', cursor, scope: { user_id: 'u' }, order: 'asc' });
    expect(page(undefined).text).toBe(page('c0ffee00-0000-4000-8000-000000000000').text);
  });

  it('sorts by an expression and finds the cursor row through SQL that reads its id', () => {
    const page = {
      table: 'token_usage_model_months',
      alias: 't',
      sortBy: (p: string) => `${p}prompt_tokens + ${p}completion_tokens`,
      id: 'end_user_id',
      cursor: 'alice',
      cursorType: 'text',
      cursorId: sql`(SELECT id FROM end_users WHERE user_id = ${'alice'})`,
      scope: { month: '2026-11-01' },
      order: 'desc',
    } as const;
    expect(squash(keysetAfter(page).text)).toBe(
      '($1::text IS NULL OR (t.prompt_tokens + t.completion_tokens, t.end_user_id) < ( ' +
        'SELECT c.prompt_tokens + c.completion_tokens, c.end_user_id FROM token_usage_model_months c ' +
        'WHERE c.end_user_id = (SELECT id FROM end_users WHERE user_id = $2) AND c.month = $3))',
    );
    expect(keysetAfter(page).values).toEqual(['alice', 'alice', '2026-11-01']);
    expect(keysetOrder(page).text).toBe(
      't.prompt_tokens + t.completion_tokens DESC, t.end_user_id DESC',
    );
  });
});
