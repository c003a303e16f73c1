// The mailer's Handlebars adapter loads css-inline, a napi-rs addon whose loading creates an
// unref'd "CustomGC" handle that --detectOpenHandles cannot tell from a live one. Loaded here,
// outside the specs (--detectOpenHandles runs the suite in band, in this process, and Node loads
// an addon once per process), it is not reported, so the report lists only real leaks.
import '@nestjs-modules/mailer/adapters/handlebars.adapter';
import { createFreshDatabase, type FreshDatabase } from './fresh-database';

declare global {
  var __E2E_DATABASE__: FreshDatabase | undefined;
}

/** A fresh database for this run, on the machine's PostgreSQL or on an embedded one. */
export default async function globalSetup(): Promise<void> {
  const database = await createFreshDatabase('e2e', process.env.DATABASE_URL);
  process.env.DATABASE_URL = database.url;
  process.env.NODE_ENV = 'test';
  globalThis.__E2E_DATABASE__ = database;
}
