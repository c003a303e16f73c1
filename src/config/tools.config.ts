import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class ToolsEnv {
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(86_400)
  TOOL_TURN_TTL_SECONDS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(16)
  TOOL_MAX_ROUNDS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(10_000)
  TOOL_CALLS_IN_FLIGHT_PER_ORG?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(1)
  @Max(1_000_000)
  TOOL_TURNS_PENDING_PER_ORG?: number;
}

/** Tools of personalities (contract §26, docs/tools.md). */
export const toolsConfig = registerAs('tools', () => {
  const env = validateEnv(ToolsEnv);
  return {
    /** How long a turn paused for client tools waits for their outputs. */
    turnTtlSeconds: env.TOOL_TURN_TTL_SECONDS ?? 600,
    /** Model calls that call tools per turn; then the model answers without tools. */
    maxRounds: env.TOOL_MAX_ROUNDS ?? 4,
    /**
     * Webhook tool calls one instance has in flight per organization; past it a call gets an
     * error output at once, so one tenant's hanging endpoint cannot hold another's replies. One
     * end user's calls take at most a quarter of it (WebhookToolCaller).
     */
    callsInFlightPerOrganization: env.TOOL_CALLS_IN_FLIGHT_PER_ORG ?? 16,
    /**
     * Turns an organization may have paused at once; a new pause ends the oldest past it (as
     * expired). Each holds up to half a megabyte (32 request tools of 16 KiB) for the turn's TTL.
     */
    pendingTurnsPerOrganization: env.TOOL_TURNS_PENDING_PER_ORG ?? 1_000,
  };
});

export type ToolsConfig = ReturnType<typeof toolsConfig>;
