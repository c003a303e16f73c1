import { registerAs } from '@nestjs/config';
import { Transform } from 'class-transformer';
import { IsInt, IsOptional, Max, Min } from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class EndUsersEnv {
  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(0)
  @Max(30 * 86_400)
  ERASURE_GRACE_SECONDS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  ERASURE_POLL_INTERVAL_MS?: number;
}

export const endUsersConfig = registerAs('endUsers', () => {
  const env = validateEnv(EndUsersEnv);
  return {
    erasureGraceSeconds: env.ERASURE_GRACE_SECONDS ?? 30,
    erasurePollIntervalMs: env.ERASURE_POLL_INTERVAL_MS ?? 1_000,
  };
});

export type EndUsersConfig = ReturnType<typeof endUsersConfig>;
