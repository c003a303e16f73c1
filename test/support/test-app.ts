import type { NestExpressApplication } from '@nestjs/platform-express';
import { Test, TestingModuleBuilder } from '@nestjs/testing';
import type { NestContainer } from '@nestjs/core';
import Redis from 'ioredis';
import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { AppModule } from '../../src/app.module';
import { setupApp } from '../../src/app.setup';
import { createHttpAdapter } from '../../src/common/http/http-adapter';
import { httpConfig } from '../../src/config/http.config';
import { LOG_DESTINATION } from '../../src/common/logging/root-logger';

/** Collects the JSON lines the app logs, so specs can assert on them. */
export class LogCapture {
  readonly raw: string[] = [];

  write(chunk: string): void {
    this.raw.push(...chunk.split('\n').filter((line) => line.length > 0));
  }

  entries(): Array<Record<string, unknown>> {
    return this.raw.map((line) => JSON.parse(line) as Record<string, unknown>);
  }

  forRequest(requestId: string): Array<Record<string, unknown>> {
    return this.entries().filter((entry) => entry.requestId === requestId);
  }

  text(): string {
    return this.raw.join('\n');
  }
}

export interface TestApp {
  app: NestExpressApplication;
  server: Server;
  logs: LogCapture;
  http: () => ReturnType<typeof request>;
  close: () => Promise<void>;
}

/** What the HTTP helpers of the specs need: the in-process app, or a built one by its URL. */
export type HttpTarget = Pick<TestApp, 'http'>;

export interface TestAppOptions {
  /** Environment variables for this app only (restored after it is built). */
  env?: Record<string, string | undefined>;
  /** Test-only modules mounted beside AppModule (e.g. a route that throws). */
  imports?: Array<new (...args: never[]) => unknown>;
  /** Further provider overrides (e.g. a clock); the e2e app is otherwise the production one. */
  override?: (builder: TestingModuleBuilder) => TestingModuleBuilder;
}

/**
 * Specs exercise features, often with bursts of sign-ups, logins (the 15-attempt lockout outgrows
 * the auth bucket's 10) and concurrent writes from one address; buckets sized for production
 * would answer some of them 429. So every test app gets roomy buckets unless its spec sets its
 * own (test/rate-limit.e2e-spec.ts does; `undefined` restores the production default), and, when
 * REDIS_URL is set, a key prefix of its own: apps share buckets only when a spec says so.
 */
export const rateLimitDefaults = (): Record<string, string> => ({
  RATE_LIMIT_REDIS_PREFIX: `e2e-${randomUUID()}:`,
  RATE_LIMIT_ORG_RPS: '10000',
  RATE_LIMIT_ORG_BURST: '10000',
  RATE_LIMIT_IP_RPS: '10000',
  RATE_LIMIT_IP_BURST: '10000',
  RATE_LIMIT_AUTH_RPS: '10000',
  RATE_LIMIT_AUTH_BURST: '10000',
});

/** Builds the app exactly as main.ts does (AppModule + setupApp), on the run's database. */
export async function createTestApp(options: TestAppOptions = {}): Promise<TestApp> {
  const saved = new Map<string, string | undefined>();
  // No metrics server unless a spec asks for one: its default port would clash between apps
  // (and between runs on one machine); test/metrics.e2e-spec.ts gives it a free port. Webhook
  // receivers of the specs listen on random ports: any port is allowed unless a spec says
  // otherwise (test/webhooks.e2e-spec.ts checks the production default).
  const env = {
    METRICS_PORT: '0',
    WEBHOOK_ALLOWED_PORTS: '1-65535',
    ...rateLimitDefaults(),
    ...options.env,
  };
  for (const [name, value] of Object.entries(env)) {
    saved.set(name, process.env[name]);
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  try {
    const logs = new LogCapture();
    let builder = Test.createTestingModule({ imports: [AppModule, ...(options.imports ?? [])] })
      .overrideProvider(LOG_DESTINATION)
      .useValue(logs);
    if (options.override) builder = options.override(builder);
    let moduleRef;
    try {
      moduleRef = await builder.compile();
    } catch (error) {
      await releasePartialModule(builder);
      throw error;
    }
    const app = moduleRef.createNestApplication<NestExpressApplication>(
      createHttpAdapter(httpConfig()),
      {
        bodyParser: false,
        logger: false,
      },
    );
    setupApp(app);
    try {
      await app.init();
    } catch (error) {
      // What started before the failure (the pool, Redis, the HTTP server) must not keep a red
      // run from ending.
      await app.close().catch(() => undefined);
      throw error;
    }
    const server = app.getHttpServer();
    return {
      app,
      server,
      logs,
      http: () => request(server),
      close: () => app.close(),
    };
  } finally {
    for (const [name, value] of saved) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

/**
 * A module that fails to compile (a database that refuses the connection) has no application to
 * close, so no shutdown hook runs: the connections its factories already opened (the Redis client,
 * an initialized DataSource) would keep a red run from ending. They are closed here.
 */
async function releasePartialModule(builder: TestingModuleBuilder): Promise<void> {
  // The builder's container is private; nothing public reaches a module that did not compile.
  const container = (builder as unknown as { container: NestContainer }).container;
  for (const module of container.getModules().values()) {
    for (const wrapper of module.providers.values()) {
      const instance: unknown = wrapper.instance;
      if (instance instanceof Redis) instance.disconnect();
      else if (instance instanceof DataSource && instance.isInitialized) {
        await instance.destroy().catch(() => undefined);
      }
    }
  }
}
