import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { runFromSource, waitUntilReady } from './support/built-app';
import { freePort } from './support/ports';

/**
 * A crash in the middle of writes: the real process (as main.ts starts it) takes a concurrent load
 * of POST /v1/end-users and POST /v1/respond, is killed with SIGKILL (no shutdown hook runs), and
 * is started again on the same database. Every write it acknowledged (2xx) must be there, and no
 * write may be half-done: an exchange is two memories, one relationship month and its count, all
 * or nothing.
 */

const WORKERS = 12;
const LOAD_BEFORE_KILL_MS = 1500;
const JWT_SECRET = `crash-test-secret-${randomUUID()}`;

interface Service {
  child: ChildProcess;
  base: string;
}

async function startService(port: number): Promise<Service> {
  const service = runFromSource({
    PORT: String(port),
    LOG_LEVEL: 'warn',
    JWT_SECRET,
    RATE_LIMIT_ENABLED: 'false',
    // No metrics listener: a fixed port would collide with other services on the machine.
    METRICS_PORT: '0',
  });
  await waitUntilReady(service, port, 60_000);
  return { child: service.child, base: `http://127.0.0.1:${port}` };
}

async function post(base: string, path: string, auth: string | undefined, body: unknown) {
  const response = await fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      ...(auth ? { authorization: auth } : {}),
    },
    body: JSON.stringify(body),
  });
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : undefined };
}

describe('Crash safety (SIGKILL during a write load, then a restart)', () => {
  let service: Service | undefined;
  let db: Client;

  beforeAll(async () => {
    db = new Client({ connectionString: process.env.DATABASE_URL });
    await db.connect();
  });
  afterAll(async () => {
    if (service && service.child.exitCode === null) service.child.kill('SIGKILL');
    await db.end();
  });

  it('keeps every acknowledged write and leaves none half-done', async () => {
    const port = await freePort();
    service = await startService(port);

    const signUp = await post(service.base, '/v1/auth/signup', undefined, {
      email: `crash-${randomUUID()}@example.test`,
      password: `correct horse ${randomUUID()}`,
    });
    expect(signUp.status).toBe(201);
    const organizationId = signUp.body.organization.id as string;
    const ownerAuth = `Bearer ${signUp.body.access_token}`;
    const key = await post(service.base, '/v1/api-keys', ownerAuth, {
      name: 'crash load',
      scopes: ['read_write'],
    });
    expect(key.status).toBe(201);
    const auth = `Bearer ${key.body.key}`;
    const personality = await post(service.base, '/v1/personalities/from-catalog', auth, {
      slug: 'sage-mentor',
    });
    expect(personality.status).toBe(201);
    const personalityId = personality.body.id as string;

    // The load: each worker alternates a new end user and a respond (half of them to a user
    // of its own not yet created, so respond's implicit creation is in the mix too).
    const createdUsers: string[] = [];
    const responds: Array<{ userId: string; message: string }> = [];
    let attempted = 0;
    let killed = false;
    const running = service;
    const worker = async (index: number) => {
      for (let round = 0; !killed; round++) {
        attempted += 1;
        try {
          if (round % 2 === 0) {
            const userId = `crash-eu-${index}-${randomUUID()}`;
            const answer = await post(running.base, '/v1/end-users', auth, { user_id: userId });
            if (answer.status >= 200 && answer.status < 300) createdUsers.push(userId);
          } else {
            const userId =
              round % 4 === 1 && createdUsers.length > 0
                ? createdUsers[createdUsers.length - 1]
                : `crash-rs-${index}-${randomUUID()}`;
            const message = `crash message ${randomUUID()}`;
            const answer = await post(running.base, '/v1/respond', auth, {
              personality_id: personalityId,
              user_id: userId,
              message,
            });
            if (answer.status >= 200 && answer.status < 300) responds.push({ userId, message });
          }
        } catch {
          // The connection died with the process: not acknowledged, so nothing is owed.
        }
      }
    };
    const load = Promise.all(Array.from({ length: WORKERS }, (_, index) => worker(index)));
    // Killed mid-load: after a minimum time, and once enough writes were acknowledged that the
    // check below means something (on a busy machine that takes longer than the minimum).
    const loadStarted = Date.now();
    while (
      Date.now() - loadStarted < LOAD_BEFORE_KILL_MS ||
      (createdUsers.length + responds.length <= 20 && Date.now() - loadStarted < 20_000)
    ) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const exited = new Promise((resolve) => running.child.once('exit', resolve));
    running.child.kill('SIGKILL');
    await exited;
    killed = true;
    await load;
    expect(createdUsers.length + responds.length).toBeGreaterThan(20);

    // Requests the dead process had taken but not answered may have committed or not; either is
    // fine. The restart must find everything that was answered 2xx.
    service = await startService(port);

    let usersFound = 0;
    for (const userId of createdUsers) {
      const response = await fetch(`${service.base}/v1/end-users/${encodeURIComponent(userId)}`, {
        headers: { authorization: auth },
      });
      const body = (await response.json()) as { status?: string };
      if (response.status === 200 && body.status === 'active') usersFound += 1;
    }

    const messages = responds.map((r) => r.message);
    const found = await db.query<{ content: string; user_id: string; has_month: boolean }>(
      `SELECT m.content, e.user_id,
              EXISTS (SELECT 1 FROM relationship_months rm
                       WHERE rm.organization_id = m.organization_id
                         AND rm.end_user_id = m.end_user_id
                         AND rm.personality_id = m.personality_id
                         AND rm.month = date_trunc('month', m.created_at AT TIME ZONE 'UTC')::date) AS has_month
         FROM memories m JOIN end_users e ON e.id = m.end_user_id
        WHERE m.organization_id = $1 AND m.role = 'user' AND m.content = ANY($2)`,
      [organizationId, messages],
    );
    const respondsFound = responds.filter((r) =>
      found.rows.some(
        (row) => row.content === r.message && row.user_id === r.userId && row.has_month,
      ),
    ).length;

    console.log(
      `crash test: ${attempted} writes attempted; acknowledged ${createdUsers.length} end users ` +
        `and ${responds.length} responds; found after restart ${usersFound} end users and ` +
        `${respondsFound} responds`,
    );
    expect(usersFound).toBe(createdUsers.length);
    expect(respondsFound).toBe(responds.length);

    // Nothing half-done, acknowledged or not: every exchange is a user memory and a reply ...
    const unpaired = await db.query(
      `SELECT end_user_id, personality_id,
              count(*) FILTER (WHERE role = 'user') AS asked,
              count(*) FILTER (WHERE role = 'personality') AS answered
         FROM memories WHERE organization_id = $1
        GROUP BY end_user_id, personality_id
       HAVING count(*) FILTER (WHERE role = 'user') <> count(*) FILTER (WHERE role = 'personality')`,
      [organizationId],
    );
    expect(unpaired.rows).toEqual([]);
    // ... no memory without the relationship month it belongs to ...
    const orphans = await db.query(
      `SELECT m.id FROM memories m
        WHERE m.organization_id = $1
          AND NOT EXISTS (SELECT 1 FROM relationship_months rm
                           WHERE rm.organization_id = m.organization_id
                             AND rm.end_user_id = m.end_user_id
                             AND rm.personality_id = m.personality_id
                             AND rm.month = date_trunc('month', m.created_at AT TIME ZONE 'UTC')::date)`,
      [organizationId],
    );
    expect(orphans.rows).toEqual([]);
    // ... the month's counter counts exactly the relationship rows written ...
    const counters = await db.query(
      `SELECT c.month, c.active_relationships::int AS counted,
              (SELECT count(*)::int FROM relationship_months rm
                WHERE rm.organization_id = c.organization_id AND rm.month = c.month) AS rows
         FROM usage_monthly_counters c WHERE c.organization_id = $1`,
      [organizationId],
    );
    for (const counter of counters.rows) expect(counter.counted).toBe(counter.rows);
    // ... and no end user in a state between the two it may be in.
    const stuck = await db.query(
      `SELECT user_id, status, erase_after FROM end_users
        WHERE organization_id = $1
          AND (status NOT IN ('active', 'deleting') OR (status = 'deleting') <> (erase_after IS NOT NULL)
               OR status = 'deleting')`,
      [organizationId],
    );
    expect(stuck.rows).toEqual([]);

    // The restarted service takes writes again.
    const after = await post(service.base, '/v1/respond', auth, {
      personality_id: personalityId,
      user_id: `crash-after-${randomUUID()}`,
      message: 'still here?',
    });
    expect(after.status).toBe(200);
    service.child.kill('SIGTERM');
    await new Promise((resolve) => service?.child.once('exit', resolve));
  }, 180_000);
});
