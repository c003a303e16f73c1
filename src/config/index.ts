import { appConfig } from './app.config';
import { authConfig } from './auth.config';
import { billingConfig } from './billing.config';
import { databaseConfig } from './database.config';
import { embeddingsConfig } from './embeddings.config';
import { endUsersConfig } from './end-users.config';
import { engineConfig, modelsConfig } from './engine.config';
import { httpConfig } from './http.config';
import { knowledgeConfig } from './knowledge.config';
import { mailConfig } from './mail.config';
import { memoryConfig } from './memory.config';
import { rateLimitConfig } from './rate-limit.config';
import { redisConfig } from './redis.config';
import { safetyConfig } from './safety.config';
import { teamsConfig } from './teams.config';
import { telemetryConfig } from './telemetry.config';
import { toolsConfig } from './tools.config';
import { webhooksConfig } from './webhooks.config';

/** Every configuration concern, loaded and validated together at start-up. */
export const configLoaders = [
  appConfig,
  httpConfig,
  databaseConfig,
  redisConfig,
  authConfig,
  mailConfig,
  rateLimitConfig,
  billingConfig,
  endUsersConfig,
  engineConfig,
  modelsConfig,
  memoryConfig,
  embeddingsConfig,
  knowledgeConfig,
  safetyConfig,
  teamsConfig,
  telemetryConfig,
  toolsConfig,
  webhooksConfig,
];
