import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { Client } from 'pg';
import type { CatalogEntryFile } from '../src/personalities/entities/personality-definition';
import { ensureBuilt, runBuilt } from './support/built-app';
import { WebhookReceiver } from './support/webhook-receiver';

const root = join(__dirname, '..');
const shipped = JSON.parse(
  readFileSync(join(root, 'src/personalities/data/catalog.json'), 'utf8'),
) as CatalogEntryFile[];

function catalogFile(entries: unknown): string {
  const path = join(mkdtempSync(join(tmpdir(), 'catalog-')), 'catalog.json');
  writeFileSync(path, typeof entries === 'string' ? entries : JSON.stringify(entries));
  return path;
}

/**
 * `node dist/cli.js catalog import FILE` as an operator runs it (the README's `npm run cli -- …`
 * once), on this run's database; `migrate` is test/migrate-job.e2e-spec.ts's.
 */
describe('The CLI, spawned: node dist/cli.js catalog import', () => {
  let db: Client;

  beforeAll(async () => {
    ensureBuilt();
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
  }, 180_000);
  afterAll(() => db.end());

  async function catalogRow(slug: string) {
    const { rows } = await db.query<{ name: string; version: string }>(
      'SELECT name, version FROM catalog_personalities WHERE slug = $1',
      [slug],
    );
    return rows[0];
  }

  it('imports a file (upsert by slug), then an update of it; says what it imported', async () => {
    const slug = `cli-${Date.now()}`;
    const first = runBuilt(
      'cli.js',
      ['catalog', 'import', catalogFile([{ ...shipped[0], slug }])],
      {
        METRICS_PORT: '0',
      },
    );
    expect(await first.exited).toBe(0);
    expect(first.output()).toContain(`Imported 1 catalog entry: ${slug}@${shipped[0].version}`);
    expect(await catalogRow(slug)).toEqual({ name: shipped[0].name, version: shipped[0].version });

    const changed = { ...shipped[0], slug, name: 'Changed', version: '9.0.0' };
    const second = runBuilt('cli.js', ['catalog', 'import', catalogFile([changed])], {
      METRICS_PORT: '0',
    });
    expect(await second.exited).toBe(0);
    expect(await catalogRow(slug)).toEqual({ name: 'Changed', version: '9.0.0' });
  }, 60_000);

  it('the README form, `npm run cli -- catalog import FILE`, runs the same command', async () => {
    const slug = `cli-npm-${Date.now()}`;
    const { stdout } = await promisify(execFile)(
      'npm',
      ['run', '-s', 'cli', '--', 'catalog', 'import', catalogFile([{ ...shipped[1], slug }])],
      { cwd: root, env: { ...process.env, METRICS_PORT: '0' } },
    );
    expect(stdout).toContain(`Imported 1 catalog entry: ${slug}@`);
    expect(await catalogRow(slug)).toMatchObject({ name: shipped[1].name });
  }, 60_000);

  it('refuses a bad file whole, naming the problem, before connecting (exit 1)', async () => {
    const slug = `cli-bad-${Date.now()}`;
    const good = { ...shipped[0], slug };
    const cases: Array<[unknown, RegExp]> = [
      ['[{', /is not JSON/],
      [{ slug }, /must be array/],
      [[good, { ...shipped[1], version: 'one' }], /entry 2 \("sunny-coach"\) \/version must match/],
      [[{ ...good, colour: 'red' }], /has an unknown field "colour"/],
      [[good, good], /repeats the slug/],
    ];
    for (const [content, message] of cases) {
      // No database at all: a bad file is refused before anything connects.
      const run = runBuilt('cli.js', ['catalog', 'import', catalogFile(content)], {
        DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none',
      });
      expect(await run.exited).toBe(1);
      expect(run.output()).toMatch(message);
    }
    expect(await catalogRow(slug)).toBeUndefined();
  }, 60_000);

  it('a wrong command line prints the usage (exit 2)', async () => {
    const run = runBuilt('cli.js', ['catalog', 'export'], {});
    expect(await run.exited).toBe(2);
    expect(run.output()).toContain('Usage: node dist/cli.js migrate');
  });

  describe('beside a running server', () => {
    let busy: Server;
    let receiver: WebhookReceiver;

    beforeAll(async () => {
      busy = createServer((_request, response) => response.end());
      await new Promise<void>((resolve) => busy.listen(0, '127.0.0.1', resolve));
      receiver = await new WebhookReceiver().start();
    });
    afterAll(async () => {
      await new Promise((resolve) => busy.close(resolve));
      await receiver.stop();
    });

    it('serves no metrics (the server holds the port) and runs no background job (a due webhook stays due)', async () => {
      const { rows } = await db.query<{ id: string }>(
        `WITH org AS (INSERT INTO organizations (name) VALUES ('cli spec') RETURNING id),
              endpoint AS (
                INSERT INTO webhook_endpoints (organization_id, url, events, secret)
                SELECT id, $1, '{end_user.created}', 'whsec_' || repeat('A', 32) FROM org
                RETURNING id, organization_id),
              event AS (
                INSERT INTO webhook_events (organization_id, type, data, created_at)
                SELECT organization_id, 'end_user.created', '{}', now() FROM endpoint RETURNING id)
         INSERT INTO webhook_delivery_attempts
           (organization_id, endpoint_id, event_id, event_type, attempt, next_attempt_at, created_at)
         SELECT endpoint.organization_id, endpoint.id, event.id, 'end_user.created', 1, now(), now()
           FROM endpoint, event
         RETURNING id`,
        [receiver.url('ok/cli')],
      );
      const run = runBuilt(
        'cli.js',
        ['catalog', 'import', catalogFile([{ ...shipped[2], slug: `cli-busy-${Date.now()}` }])],
        {
          METRICS_PORT: String((busy.address() as AddressInfo).port),
          WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
          WEBHOOK_POLL_INTERVAL_MS: '50',
        },
      );
      expect(await run.exited).toBe(0);
      expect(receiver.received).toEqual([]);
      const attempt = await db.query<{ status: string; locked_until: Date | null }>(
        'SELECT status, locked_until FROM webhook_delivery_attempts WHERE id = $1',
        [rows[0].id],
      );
      expect(attempt.rows[0]).toEqual({ status: 'pending', locked_until: null });
      await db.query('DELETE FROM organizations WHERE name = $1', ['cli spec']);
    }, 60_000);
  });
});
