import { randomBytes } from 'node:crypto';
import { registerAs } from '@nestjs/config';
import { plainToInstance, Transform } from 'class-transformer';
import {
  IsInt,
  IsOptional,
  IsString,
  IsUrl,
  Matches,
  Max,
  Min,
  MinLength,
  ValidateIf,
  validateSync,
} from 'class-validator';
import { toNumber, validateEnv } from './validate-env';

class AuthEnv {
  // Required in production; elsewhere a random per-process secret is used (tokens die on restart).
  @ValidateIf(
    (env: AuthEnv & { NODE_ENV?: string }) =>
      env.NODE_ENV === 'production' || env.JWT_SECRET !== undefined,
  )
  @IsString()
  @MinLength(32, {
    message: 'JWT_SECRET must be at least 32 characters (required when NODE_ENV=production)',
  })
  // 32 spaces pass a length (found by review): the characters that are not are counted.
  @Matches(/^(?=(?:\s*\S){32})/s, {
    message: 'JWT_SECRET must hold at least 32 characters that are not spaces',
  })
  JWT_SECRET?: string;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(60)
  @Max(86_400)
  JWT_TTL_SECONDS?: number;

  @IsOptional()
  @Transform(toNumber)
  @IsInt()
  @Min(60)
  @Max(86_400)
  RESET_TOKEN_TTL_SECONDS?: number;

  @IsOptional()
  @IsString()
  SSO_PROVIDERS?: string;

  NODE_ENV?: string;
}

// One per process, so every app instance of a process (tests build several) agrees on it.
const DEVELOPMENT_SECRET = randomBytes(48).toString('base64url');

export class SsoProviderConfig {
  @IsString()
  @Matches(/^[a-z0-9][a-z0-9_-]{0,62}$/, {
    message: 'id must be lowercase letters, digits, - or _',
  })
  id: string;

  @IsString()
  issuer: string;

  @IsString()
  audience: string;

  @IsUrl({ require_tld: false, require_protocol: true, protocols: ['http', 'https'] })
  jwks_uri: string;
}

function parseSsoProviders(raw: string | undefined): SsoProviderConfig[] {
  if (!raw || raw.trim() === '') return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new Error('Invalid configuration:\n  SSO_PROVIDERS: must be a JSON array');
  }
  if (!Array.isArray(parsed))
    throw new Error('Invalid configuration:\n  SSO_PROVIDERS: must be a JSON array');
  const providers = plainToInstance(SsoProviderConfig, parsed as object[]);
  const problems = providers.flatMap((provider, index) =>
    validateSync(provider).map(
      (error) =>
        `SSO_PROVIDERS[${index}].${error.property}: ${Object.values(error.constraints ?? {}).join('; ')}`,
    ),
  );
  const ids = providers.map((provider) => provider.id);
  if (new Set(ids).size !== ids.length) problems.push('SSO_PROVIDERS: provider ids must be unique');
  if (problems.length > 0) throw new Error(`Invalid configuration:\n  ${problems.join('\n  ')}`);
  return providers;
}

export const authConfig = registerAs('auth', () => {
  const env = validateEnv(AuthEnv);
  return {
    jwtSecret: env.JWT_SECRET ?? DEVELOPMENT_SECRET,
    jwtTtlSeconds: env.JWT_TTL_SECONDS ?? 3600,
    jwtAudience: 'personality-api',
    resetTokenTtlSeconds: env.RESET_TOKEN_TTL_SECONDS ?? 3600,
    ssoProviders: parseSsoProviders(env.SSO_PROVIDERS),
  };
});

export type AuthConfig = ReturnType<typeof authConfig>;
