import { ensureBuilt } from '../../support/built-app';
import { createFreshDatabase, type FreshDatabase } from '../../support/fresh-database';
import { CHROMIUM_CANDIDATES, findChromium } from './chromium';

declare global {
  var __BROWSER_DATABASE__: FreshDatabase | undefined;
}

/**
 * Builds the service and its console and makes the run's database (on the machine's PostgreSQL
 * when DATABASE_URL is set, else an embedded one), or says in one line why the browser tests are
 * skipped.
 */
export default async function globalSetup(): Promise<void> {
  if (!findChromium()) {
    process.stdout.write(
      `\nBrowser tests skipped: no Chromium at ${CHROMIUM_CANDIDATES.join(', ')} (apt-get install chromium, or set CHROMIUM_PATH).\n`,
    );
    return;
  }
  ensureBuilt();
  const database = await createFreshDatabase('browser', process.env.DATABASE_URL);
  process.env.DATABASE_URL = database.url;
  globalThis.__BROWSER_DATABASE__ = database;
}
