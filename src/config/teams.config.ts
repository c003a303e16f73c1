import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class TeamsEnv {
  /** How long an invitation's link works. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(60)
  @Max(90 * 86_400)
  INVITATION_TTL_SECONDS?: number;

  /** Invitations one organization may send per UTC day (each send counts, a new link too). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(100_000)
  INVITATIONS_PER_DAY?: number;

  /**
   * API keys one member may make in an organization per UTC day, created or rolled, and as many
   * the keys of their lines: a member's removal revokes every key down their lines in one
   * statement, whose time grows with how many there are.
   */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  API_KEYS_PER_DAY?: number;

  /** Organizations one user may create, the one made at sign-up included. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(10_000)
  ORGANIZATIONS_PER_USER?: number;

  /** How long audit events are kept before the periodic purge deletes them. */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(36_500)
  AUDIT_RETENTION_DAYS?: number;

  /** How often each instance runs the audit purge (tests shorten it). */
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(86_400_000)
  AUDIT_PURGE_INTERVAL_MS?: number;
}

export const teamsConfig = registerAs('teams', () => {
  const env = validateEnv(TeamsEnv);
  return {
    invitationTtlSeconds: env.INVITATION_TTL_SECONDS ?? 7 * 86_400,
    invitationsPerDay: env.INVITATIONS_PER_DAY ?? 50,
    apiKeysPerDay: env.API_KEYS_PER_DAY ?? 1_000,
    organizationsPerUser: env.ORGANIZATIONS_PER_USER ?? 10,
    auditRetentionDays: env.AUDIT_RETENTION_DAYS ?? 365,
    auditPurgeIntervalMs: env.AUDIT_PURGE_INTERVAL_MS ?? 3_600_000,
  };
});

export type TeamsConfig = ReturnType<typeof teamsConfig>;
