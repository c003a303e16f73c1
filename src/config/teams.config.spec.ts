import { teamsConfig } from './teams.config';

describe('teams configuration', () => {
  const saved = { ...process.env };
  afterEach(() => {
    process.env = { ...saved };
  });

  it('defaults to 7-day invitations, 365-day audit retention and an hourly purge', () => {
    delete process.env.INVITATION_TTL_SECONDS;
    delete process.env.AUDIT_RETENTION_DAYS;
    delete process.env.AUDIT_PURGE_INTERVAL_MS;
    expect(teamsConfig()).toEqual({
      invitationTtlSeconds: 604_800,
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
    ]) {
      process.env = { ...saved, [name]: value };
      expect(() => teamsConfig()).toThrow(new RegExp(name));
    }
  });
});
