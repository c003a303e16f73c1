/** Drops the run's database (and stops the embedded PostgreSQL, if one was started). */
export default async function globalTeardown(): Promise<void> {
  await globalThis.__BROWSER_DATABASE__?.drop();
}
