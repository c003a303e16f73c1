import { randomUUID } from 'node:crypto';
import { Client } from 'pg';
import { ensureBuilt, runBuilt, waitUntilReady } from './support/built-app';
import { createFreshDatabase, type FreshDatabase } from './support/fresh-database';
import { freePort } from './support/ports';

/** What a Kubernetes Job (or init container) does before the new pods start. */
describe('Migrations as a job: `node dist/cli.js migrate`, then MIGRATE_ON_START=false', () => {
  let database: FreshDatabase;

  beforeAll(async () => {
    ensureBuilt();
    // A database of its own, empty: the run's shared one is already migrated.
    database = await createFreshDatabase('migrate_job', process.env.DATABASE_URL);
  }, 180_000);

  afterAll(async () => {
    await database?.drop();
  });

  /** The built service on the spec's database, as a pod started after (or before) the Job. */
  const startWithoutMigrating = async (port?: number) =>
    runBuilt('main.js', [], {
      DATABASE_URL: database.url,
      PORT: String(port ?? (await freePort())),
      METRICS_PORT: '0',
      MIGRATE_ON_START: 'false',
    });

  async function tables(): Promise<string[]> {
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ name: string }>(
        `SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY 1`,
      );
      return rows.map((row) => row.name);
    } finally {
      await client.end();
    }
  }

  it('with MIGRATE_ON_START=false the app does not migrate: on an empty database it stops, schema untouched', async () => {
    const app = await startWithoutMigrating();
    // A pod started before the Job has run crash-loops until it has, rather than racing it.
    expect(await app.exited).toBe(1);
    expect(app.output()).toContain('Start-up failed');
    expect(app.output()).toContain('run `node dist/cli.js migrate`');
    expect(await tables()).toEqual([]);
  });

  it('migrate applies every migration and exits 0; a second run has nothing to do', async () => {
    const first = runBuilt('cli.js', ['migrate'], { DATABASE_URL: database.url });
    expect(await first.exited).toBe(0);
    expect(first.output()).toMatch(/^Applied \d+ migration\(s\): Create/m);
    expect(await tables()).toEqual(
      expect.arrayContaining(['typeorm_migrations', 'users', 'organizations', 'end_users']),
    );

    const second = runBuilt('cli.js', ['migrate'], { DATABASE_URL: database.url });
    expect(await second.exited).toBe(0);
    expect(second.output()).toContain('No pending migrations');
  });

  it('then the app starts with MIGRATE_ON_START=false and serves', async () => {
    const port = await freePort();
    const app = await startWithoutMigrating(port);
    try {
      await waitUntilReady(app, port);
      const signup = await fetch(`http://127.0.0.1:${port}/v1/auth/signup`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({
          email: `job-${randomUUID()}@example.test`,
          password: `pw ${randomUUID()}`,
        }),
      });
      expect(signup.status).toBe(201);
    } finally {
      expect(await app.stop()).toBe(0);
    }
    // Nest's own start-up lines too, once the JSON logger is there: every line is JSON.
    const lines = app.output().trim().split('\n');
    expect(lines.some((line) => line.includes('Mapped {'))).toBe(true);
    for (const line of lines) expect(() => JSON.parse(line) as unknown).not.toThrow();
  });

  it('with MIGRATE_ON_START=false it refuses to start on a database one migration behind, naming the fix', async () => {
    // A rollout whose pods start before its migrations' Job has finished: before, the pod was
    // ready and answered 500 on every table the last migration changed.
    const client = new Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ id: number; timestamp: string; name: string }>(
        'DELETE FROM typeorm_migrations WHERE id = (SELECT max(id) FROM typeorm_migrations) RETURNING *',
      );
      try {
        const app = await startWithoutMigrating();
        expect(await app.exited).toBe(1);
        expect(app.output()).toContain(
          `The database has 1 migration(s) of this release still to apply (${rows[0].name} the last), and MIGRATE_ON_START=false`,
        );
      } finally {
        await client.query(
          'INSERT INTO typeorm_migrations (id, timestamp, name) VALUES ($1, $2, $3)',
          [rows[0].id, rows[0].timestamp, rows[0].name],
        );
      }
    } finally {
      await client.end();
    }
  });

  it('two migrate runs at once (two Jobs, two init containers): one applies, the other waits and finds nothing', async () => {
    const racing = await createFreshDatabase('migrate_race', process.env.DATABASE_URL);
    try {
      const runs = [0, 1].map(() => runBuilt('cli.js', ['migrate'], { DATABASE_URL: racing.url }));
      expect(await Promise.all(runs.map((run) => run.exited))).toEqual([0, 0]);
      const outputs = runs.map((run) => run.output());
      expect(
        outputs.filter((output) => /^Applied \d+ migration\(s\): Create/m.test(output)),
      ).toHaveLength(1);
      expect(outputs.filter((output) => output.includes('No pending migrations'))).toHaveLength(1);
      const client = new Client({ connectionString: racing.url });
      await client.connect();
      try {
        const { rows } = await client.query<{ runs: number; names: number }>(
          'SELECT count(*)::int AS runs, count(DISTINCT name)::int AS names FROM typeorm_migrations',
        );
        expect(rows[0].runs).toBe(rows[0].names);
      } finally {
        await client.end();
      }
    } finally {
      await racing.drop();
    }
  });

  it('says once whom it waits for while another session holds the migration lock (review)', async () => {
    const holder = new Client({ connectionString: database.url });
    await holder.connect();
    try {
      const { rows } = await holder.query<{ pid: number }>(
        'SELECT pg_backend_pid() AS pid, pg_advisory_lock(727301001)',
      );
      const run = runBuilt('cli.js', ['migrate'], { DATABASE_URL: database.url });
      const said = `Waiting for the migration lock, held by PostgreSQL backend ${rows[0].pid}`;
      for (let waited = 0; !run.output().includes(said) && waited < 30_000; waited += 100) {
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(run.output()).toContain(said);
      expect(run.child.exitCode).toBeNull();
      await holder.query('SELECT pg_advisory_unlock(727301001)');
      expect(await run.exited).toBe(0);
      expect(run.output().split(said)).toHaveLength(2);
      expect(run.output()).toContain('No pending migrations');
    } finally {
      await holder.end();
    }
  });

  it('two instances migrating as they start: one logs what it applied and how long it took, the other that nothing was pending', async () => {
    // TypeORM writes each applied migration at debug: no line said which instance migrated (review).
    const racing = await createFreshDatabase('migrate_start_race', process.env.DATABASE_URL);
    const instances = await Promise.all(
      [0, 1].map(async () => {
        const port = await freePort();
        const app = runBuilt('main.js', [], {
          DATABASE_URL: racing.url,
          PORT: String(port),
          METRICS_PORT: '0',
          MIGRATE_ON_START: 'true',
          LOG_LEVEL: 'info',
        });
        return { app, port };
      }),
    );
    try {
      await Promise.all(instances.map(({ app, port }) => waitUntilReady(app, port)));
      const lines = instances.map(({ app }) =>
        app
          .output()
          .split('\n')
          .filter((line) => line.startsWith('{'))
          .map((line) => JSON.parse(line) as { context?: string; msg?: string })
          .filter((entry) => entry.context === 'TypeORM' && /migration/i.test(entry.msg ?? ''))
          .map((entry) => entry.msg),
      );
      const applied = lines
        .flat()
        .filter((msg) => /^Applied \d+ migration\(s\) in \d+ ms: Create/.test(msg!));
      expect(applied).toHaveLength(1);
      expect(lines.flat().filter((msg) => msg === 'No pending migrations')).toHaveLength(1);
    } finally {
      await Promise.all(instances.map(({ app }) => app.stop()));
      await racing.drop();
    }
  });

  it('a configuration it cannot start with: its reason on stderr naming the variable, and nothing else', async () => {
    const app = runBuilt('main.js', [], {
      DATABASE_URL: database.url,
      PORT: 'abc',
      METRICS_PORT: '0',
    });
    expect(await app.exited).toBe(1);
    // Before, Nest's buffered start-up lines came first, in colour on stdout (review).
    expect(app.output()).toMatch(/^Start-up failed: Invalid configuration:\n {2}PORT: /);
    expect(app.output()).not.toContain('\u001b[');
    expect(app.output()).not.toMatch(/NestFactory|InstanceLoader/);
  });

  it('refuses a configuration the pods would refuse (exit 1, review)', async () => {
    const job = runBuilt('cli.js', ['migrate'], { DATABASE_URL: database.url, PORT: 'abc' });
    expect(await job.exited).toBe(1);
    expect(job.output()).toMatch(/^Invalid configuration:\n {2}PORT: /);
  });

  it('refuses a bad EMBEDDED_PG_PORT, naming it, before starting any database (review)', async () => {
    // It had been read with Number(): `abc` was a random port, an empty value port 0.
    for (const script of ['cli.js', 'main.js'] as const) {
      const run = runBuilt(script, script === 'cli.js' ? ['migrate'] : [], {
        DATABASE_URL: '',
        EMBEDDED_PG_PORT: 'abc',
        METRICS_PORT: '0',
      });
      expect(await run.exited).toBe(1);
      expect(run.output()).toMatch(/Invalid configuration:\n {2}EMBEDDED_PG_PORT: /);
    }
  });

  it('refuses to start on the embedded PostgreSQL in production: DATABASE_URL forgotten (review)', async () => {
    for (const script of ['cli.js', 'main.js'] as const) {
      const run = runBuilt(script, script === 'cli.js' ? ['migrate'] : [], {
        DATABASE_URL: '',
        NODE_ENV: 'production',
        JWT_SECRET: 'a production secret of more than 32 characters',
        METRICS_PORT: '0',
      });
      expect(await run.exited).toBe(1);
      expect(run.output()).toContain('DATABASE_URL is required when NODE_ENV=production');
    }
  });

  it('prints its usage on --help (exit 0)', async () => {
    const help = runBuilt('cli.js', ['--help'], {});
    expect(await help.exited).toBe(0);
    expect(help.output()).toContain('node dist/cli.js migrate');
  });

  it('refuses an unknown command with its usage (exit 2)', async () => {
    const wrong = runBuilt('cli.js', ['migrate', 'now'], { DATABASE_URL: database.url });
    expect(await wrong.exited).toBe(2);
    expect(wrong.output()).toContain('node dist/cli.js migrate');
  });
});
