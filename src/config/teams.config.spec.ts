import { teamsConfig } from './teams.config';

describe('teams configuration', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('defaults to 7-day invitations, 50 a day, 1,000 keys a day, 10 organizations a user, 365-day audit retention and an hourly purge', () => {
    for (const name of [
      'INVITATION_TTL_SECONDS',
      'INVITATIONS_PER_DAY',
      'API_KEYS_PER_DAY',
      'ORGANIZATIONS_PER_USER',
      'AUDIT_RETENTION_DAYS',
      'AUDIT_PURGE_INTERVAL_MS',
    ]) {
      delete process.env[name];
    }
    expect(teamsConfig()).toEqual({
      invitationTtlSeconds: 604_800,
      invitationsPerDay: 50,
      apiKeysPerDay: 1_000,
      organizationsPerUser: 10,
      auditRetentionDays: 365,
      auditPurgeIntervalMs: 3_600_000,
    });
  });

  it('reads the variables and names a bad one', () => {
    process.env.INVITATION_TTL_SECONDS = '3600';
    process.env.AUDIT_RETENTION_DAYS = '30';
    expect(teamsConfig()).toMatchObject({ invitationTtlSeconds: 3600, auditRetentionDays: 30 });
    for (const [name, value] of [
      ['INVITATION_TTL_SECONDS', 'a week'],
      ['INVITATION_TTL_SECONDS', '0'],
      ['AUDIT_RETENTION_DAYS', '0'],
      ['AUDIT_RETENTION_DAYS', '1.5'],
      ['INVITATIONS_PER_DAY', '0'],
      ['API_KEYS_PER_DAY', '0'],
      ['ORGANIZATIONS_PER_USER', 'ten'],
    ]) {
      process.env = { ...saved, [name]: value };
      expect(() => teamsConfig()).toThrow(new RegExp(name));
    }
  });
});
