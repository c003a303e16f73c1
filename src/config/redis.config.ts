import { registerAs } from '@nestjs/config';
import { IsOptional, Matches } from 'class-validator';
import { validateEnv } from './validate-env';

class RedisEnv {
  @IsOptional()
  @Matches(/^rediss?:\/\//, { message: 'REDIS_URL must be a redis:// or rediss:// URL' })
  REDIS_URL?: string;
}

export const redisConfig = registerAs('redis', () => {
  const env = validateEnv(RedisEnv);
  return { url: env.REDIS_URL };
});

export type RedisConfig = ReturnType<typeof redisConfig>;
