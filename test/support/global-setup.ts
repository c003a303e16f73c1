import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Client } from 'pg';
import { startEmbeddedPostgres } from '../../src/database/embedded-postgres';

interface E2eDatabase {
  adminUrl: string;
  name: string;
  stop?: () => Promise<void>;
}

declare global {
  var __E2E_DATABASE__: E2eDatabase | undefined;
}

/** A fresh database for this run, on the machine's PostgreSQL or on an embedded one. */
export default async function globalSetup(): Promise<void> {
  let adminUrl = process.env.DATABASE_URL;
  let stop: (() => Promise<void>) | undefined;
  if (!adminUrl) {
    const embedded = await startEmbeddedPostgres({
      dataDir: mkdtempSync(join(tmpdir(), 'personality-api-e2e-')),
      port: 0,
      database: 'postgres',
      persistent: false,
    });
    adminUrl = embedded.url;
    stop = embedded.stop;
  }
  const name = `e2e_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  const admin = new Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE "${name}"`);
  await admin.end();

  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  process.env.DATABASE_URL = url.toString();
  process.env.NODE_ENV = 'test';
  globalThis.__E2E_DATABASE__ = { adminUrl, name, stop };
}
