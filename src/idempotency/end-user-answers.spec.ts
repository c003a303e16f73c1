import { carriesEndUserData, endUserOfAnswer, endUserSubject } from './end-user-answers';

describe('answers that carry an end user’s data', () => {
  it('are the answers of creating end users, importing them, their facts, and respond', () => {
    for (const route of [
      '/v1/end-users',
      '/v1/end-users/import',
      '/v1/end-users/:user_id/facts',
      '/v1/respond',
    ]) {
      expect(carriesEndUserData('POST', route)).toBe(true);
    }
    expect(carriesEndUserData('POST', '/v1/api-keys')).toBe(false);
    expect(carriesEndUserData('POST', undefined)).toBe(false);
  });

  it('name their end user by the answer’s user_id, else the request’s', () => {
    expect(endUserOfAnswer({ user_id: 'from-answer' }, 'from-request')).toBe('from-answer');
    expect(endUserOfAnswer({ id: 'fact' }, 'from-path')).toBe('from-path');
    expect(endUserOfAnswer(undefined, undefined)).toBeUndefined();
  });

  it('store a hash of the user_id, not the user_id', () => {
    const subject = endUserSubject('ada@example.com');
    expect(subject).toHaveLength(32);
    expect(subject.toString('utf8')).not.toContain('ada');
    expect(endUserSubject('ada@example.com').equals(subject)).toBe(true);
  });
});
