import { Client } from 'pg';

export default async function globalTeardown(): Promise<void> {
  const database = globalThis.__E2E_DATABASE__;
  if (!database) return;
  const admin = new Client({ connectionString: database.adminUrl });
  await admin.connect();
  await admin.query(`DROP DATABASE IF EXISTS "${database.name}" WITH (FORCE)`);
  await admin.end();
  await database.stop?.();
}
